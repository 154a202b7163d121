#include "core/system/host_info.hpp"

#include <unistd.h>

#include <array>

#include <torch/version.h>

namespace lrmoe {

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "unknown";
  return name.data();
}

std::string torch_version() {
  return TORCH_VERSION;
}

}  // namespace lrmoe
