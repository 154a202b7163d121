// Writing experiments out: the resolved TOML a run stores, and the schema reference.
#include <string>

#include "core/config/experiment_loader.hpp"
#include "core/config/experiment_schema.hpp"
#include "core/config/field_value.hpp"

namespace lrmoe {

std::string to_toml(const Experiment& experiment) {
  std::string toml;
  std::string section;
  for (const FieldDescriptor& field : experiment_schema()) {
    if (field.section != section) {
      if (!toml.empty()) toml += "\n";
      section = field.section;
      toml += "[" + section + "]\n";
    }
    toml += field.key + " = " + field_value_toml(field.read(experiment)) + "\n";
  }
  return toml;
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
      "every other [model] key, whichever file or --set names them. The [policies] section is "
      "reserved for policy plugins and takes no keys yet.\n";
  return markdown;
}

}  // namespace lrmoe
