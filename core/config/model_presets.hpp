#pragma once
// Named model presets: the exact dimensions of Qwen3-30B-A3B and GLM-4.5-Air, and scaled-down
// variants with the same routing structure that train on a CPU in minutes.

#include <optional>
#include <string>
#include <vector>

#include "core/config/model_config.hpp"

namespace lrmoe {

std::optional<ModelConfig> find_preset(const std::string& name);
std::vector<std::string> preset_names();
// The full-size model a preset is scaled down from (itself for a full-size one); none for a
// preset of its own (tiny-moe).
std::optional<std::string> full_size_preset(const std::string& name);

}  // namespace lrmoe
