#pragma once
// The [policies.<kind>] tables of an experiment: `name` picks the plugin, every other key is a
// parameter of that plugin, kept as written (with its place) until the plugin, which declares
// its parameters, is loaded. And the bundles, which name all four plugins at once.

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/config/policies_config.hpp"

namespace lrmoe {

struct PolicySection {
  std::string section;  // "policies.placement"
  std::string kind;     // "placement"
  PolicyChoice PoliciesConfig::*choice;
};

// placement, metric, selection, routing, in the order the pipeline consults them.
const std::vector<PolicySection>& policy_sections();
// nullptr when `section` is not one of them.
const PolicySection* find_policy_section(std::string_view section);

// A parameter's TOML value: integer, float, boolean or string; anything else is a ConfigError.
ParameterValue setting_value(const toml::node& node, const std::string& place);
std::string setting_toml(const ParameterValue& value);

// "fixed", "symi", "lrmoe", in PolicyBundle order.
std::vector<std::string> bundle_names();
// Fills each policy the experiment does not name with its bundle's plugin.
void apply_bundle(PoliciesConfig& policies);

}  // namespace lrmoe
