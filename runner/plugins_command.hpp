#pragma once
// `lrmoe plugins [--kind K]`: every policy plugin the runner finds (of one kind), with its
// version, the library it comes from, and each parameter's type, default, allowed values and
// full meaning.

#include <optional>
#include <string>
#include <vector>

namespace lrmoe {

// `extra_folders` are searched after the runner's own folder and LRMOE_PLUGIN_PATH. An unknown
// kind is a std::invalid_argument naming the kinds.
int plugins_command(const std::vector<std::string>& extra_folders,
                    const std::optional<std::string>& kind = std::nullopt);

}  // namespace lrmoe
