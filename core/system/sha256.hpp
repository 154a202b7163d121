#pragma once
// SHA-256 digests (OpenSSL), as lowercase hex: the hash of a resolved experiment, and later of
// plugin libraries.

#include <string>
#include <string_view>

namespace lrmoe {

std::string sha256_hex(std::string_view bytes);

}  // namespace lrmoe
