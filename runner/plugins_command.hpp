#pragma once
// `lrmoe plugins`: every policy plugin the runner finds, with its kind, version, parameters
// and defaults, and the library it comes from.

#include <string>
#include <vector>

namespace lrmoe {

// `extra_folders` are searched after the runner's own folder and LRMOE_PLUGIN_PATH.
int plugins_command(const std::vector<std::string>& extra_folders);

}  // namespace lrmoe
