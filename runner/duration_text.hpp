#pragma once
// Durations for people, as progress lines show them: "42s", "3m05s", "2h10m".

#include <string>

namespace lrmoe {

std::string duration_text(double seconds);

}  // namespace lrmoe
