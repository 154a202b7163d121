#pragma once
// The settings the variants of a model differ in, as `lrmoe compare` writes them under its table.

#include <string>
#include <vector>

namespace lrmoe {

// "policies.bundle, policies.placement.symi.{layout, slots}": keys sharing all but their last
// part written once, in order. A plugin's parameters (policies.<kind>.<plugin>.<parameter>) are
// left out when the kind's plugin itself differs (policies.<kind>.name is among `keys`): they
// differ because the plugin does; the text then says so once.
std::string differing_keys_text(const std::vector<std::string>& keys);

}  // namespace lrmoe
