#pragma once
// Facts about the machine and build that every run records.

#include <string>

namespace lrmoe {

std::string host_name();
std::string torch_version();  // e.g. "1.13.1"
std::string code_version();   // lrmoe version and git description at build time

}  // namespace lrmoe
