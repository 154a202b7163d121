#pragma once
// Byte sizes as people write them: "512KiB", "64MiB", "1.5GiB", "1TiB" (powers of 1024) or
// "500KB", "2.5GB" (powers of 1000), or a plain count of bytes.

#include <cstdint>
#include <string>
#include <string_view>

namespace lrmoe {

// Reads "<number>[ ]<unit>", the number whole or with decimals that come to a whole number of
// bytes (unit matched without regard to case; none or "B" means bytes). Throws
// std::invalid_argument with a reason that lists the accepted units.
uint64_t parse_byte_size(std::string_view text);

// A size for a message, rounded: "96.0 KiB", "12.34 MiB", "2.40 TiB".
std::string readable_byte_size(double bytes);

// The shortest exact spelling that parse_byte_size reads back: "80GiB", "2GB", "1000B".
std::string format_byte_size(uint64_t bytes);

}  // namespace lrmoe
