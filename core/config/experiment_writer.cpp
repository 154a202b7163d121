// Writing experiments out: the resolved TOML a run stores, and the schema reference.
#include <string>

#include "core/config/experiment_loader.hpp"
#include "core/config/experiment_schema.hpp"
#include "core/config/field_value.hpp"
#include "core/config/policy_sections.hpp"
#include "core/config/toml_text.hpp"

namespace lrmoe {

namespace {

// After a [policies.<kind>] table, its plugins' own tables: [policies.<kind>.<plugin>].
std::string policy_settings_toml(const Experiment& experiment, const std::string& section) {
  const PolicySection* policy = find_policy_section(section);
  if (policy == nullptr) return "";
  std::string toml;
  for (const auto& [plugin, settings] : (experiment.policies.*(policy->choice)).settings) {
    toml += "\n[" + section + "." + toml_key(plugin) + "]\n";
    for (const auto& [key, setting] : settings.parameters) {
      toml += toml_key(key) + " = " + setting_toml(setting.value) + "\n";
    }
  }
  return toml;
}

}  // namespace

std::string to_toml(const Experiment& experiment) {
  std::string toml;
  std::string section;
  for (const FieldDescriptor& field : experiment_schema()) {
    if (field.section != section) {
      toml += policy_settings_toml(experiment, section);
      if (!toml.empty()) toml += "\n";
      section = field.section;
      toml += "[" + section + "]\n";
    }
    const FieldValue value = field.read(experiment);
    // A model comes from a preset or a config.json: the other source is left out, not written
    // empty (which would not read back).
    if (is_model_source(field) && std::get<std::string>(value).empty()) continue;
    toml += field.key + " = " + field_value_toml(value) + "\n";
  }
  return toml + policy_settings_toml(experiment, section);
}

std::string schema_markdown() {
  std::string markdown =
      "| section | key | type | default | range / choices | meaning |\n"
      "|---|---|---|---|---|---|\n";
  for (const FieldDescriptor& field : experiment_schema()) {
    std::string allowed = field.range.describe();
    for (const std::string& choice : field.choices) {
      allowed += (allowed.empty() ? "`" : ", `") + choice + "`";
    }
    markdown += "| " + field.section + " | " + field.key + " | " +
                std::string(kind_name(field.kind)) + " | " + field.default_text + " | " + allowed +
                " | " + field.meaning + " |\n";
  }
  markdown +=
      "\nA file may start with `extends = \"base.toml\"` (a path relative to that file): the "
      "base is read first and this file's keys override it. The [model] preset applies before "
      "every other [model] key, whichever file or --set names them. In [policies.placement], "
      "[policies.metric], [policies.selection] and [policies.routing], `name` picks the plugin "
      "(default: the bundle's). A plugin's parameters go in its own table, "
      "[policies.<kind>.<plugin>] (`lrmoe plugins` lists them with their defaults); --set "
      "policies.placement.lrmoe.keep_fraction=0.5 sets one. Every such table is checked "
      "against its plugin, and only the chosen plugin's is used.\n";
  return markdown;
}

}  // namespace lrmoe
