#pragma once
// Checking an experiment's settings of a plugin's parameters against what the plugin declares
// (Note [Plugin ABI] in docs/notes.md).

#include <filesystem>
#include <map>
#include <string>

#include "core/config/policies_config.hpp"
#include "core/plugins/plugin_catalog.hpp"

namespace lrmoe {

// Every declared parameter with its value: the experiment's setting, else the default. An
// undeclared setting (with a did-you-mean), a value of the wrong type or out of range is a
// PluginError naming the place it was set.
Parameters resolve_parameters(const PluginInfo& plugin,
                              const std::map<std::string, PolicySetting>& settings);

// What a plugin library declares is itself checked when it is loaded: every parameter named once,
// minimum <= maximum, and a default of the declared type that the declaration allows (finite,
// in range, one of the choices). Otherwise a PluginError naming `library`.
void check_parameter_declarations(const PluginDescriptor& descriptor,
                                  const std::filesystem::path& library);

}  // namespace lrmoe
