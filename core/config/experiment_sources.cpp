#include "core/config/experiment_sources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "core/config/config_error.hpp"
#include "core/config/did_you_mean.hpp"
#include "core/config/field_value.hpp"
#include "core/config/policy_sections.hpp"
#include "core/config/toml_document.hpp"
#include "core/config/toml_limits.hpp"
#include "core/config/toml_text.hpp"
#include "core/config/trim_whitespace.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

constexpr std::string_view kExtendsKey = "extends";
constexpr std::string_view kSetForm = "use --set section.key=value, e.g. --set train.lr=1e-3";

// The value of a --set as TOML, or nothing when it is not valid TOML.
std::optional<toml::table> parse_override_value(const std::string& value_text,
                                                const std::string& place) {
  const std::string text = "v = " + value_text;
  check_toml_limits(text, place);
  try {
    return toml::parse(text);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

// "unknown key 'hiden_size' in [model]; did you mean 'hidden_size'?", or the list of valid
// names when none is close. `subject` is what is unknown, e.g. "key 'hiden_size' in [model]".
std::string unknown_name(const std::string& subject, const std::string& name,
                         const std::vector<std::string>& valid, const std::string& valid_what) {
  const std::string suggestion = did_you_mean(name, valid);
  return "unknown " + subject +
         (suggestion.empty() ? "; valid " + valid_what + ": " + quoted_list(valid) : suggestion);
}

void require_known_section(const std::string& section, const std::string& place) {
  const std::vector<std::string>& sections = section_names();
  if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
    throw ConfigError(place + ": " +
                      unknown_name("section '" + section + "'", section, sections, "sections"));
  }
}

const FieldDescriptor& known_field(const std::string& section, const std::string& key,
                                   const std::string& place) {
  const FieldDescriptor* field = find_field(section, key);
  if (field == nullptr) {
    throw ConfigError(
        place + ": " +
        unknown_name("key '" + key + "' in [" + section + "]", key, section_keys(section), "keys"));
  }
  return *field;
}

// A parameter written straight into [policies.<kind>]: it would belong to whichever plugin is
// chosen, so it is refused, and the message says where it goes.
std::string misplaced_parameter(const PolicySection& policy, const std::string& key,
                                const std::string& place) {
  return fmt::format(
      "{0}: '{1}' is not a key of [{2}] (its key is `name`); a plugin's parameters go in that "
      "plugin's own table, [{2}.PLUGIN] {1} = ..., or --set {2}.PLUGIN.{1}=...; `lrmoe plugins` "
      "lists each {3} plugin's parameters",
      place, key, policy.section, policy.kind);
}

}  // namespace

ExperimentSources::ExperimentSources(std::string experiment_name)
    : experiment_name_(std::move(experiment_name)) {}

ExperimentSources ExperimentSources::from_file(const fs::path& file) {
  const std::string name = file.lexically_normal().string();
  const std::string text = read_text_file(file, name);
  ExperimentSources sources(name);
  sources.add_chain_file(text, name, file.parent_path(), {fs::weakly_canonical(file)});
  return sources;
}

ExperimentSources ExperimentSources::from_text(std::string_view text, const std::string& name,
                                               const fs::path& base_dir) {
  ExperimentSources sources(name);
  sources.add_chain_file(text, name, base_dir, {});
  return sources;
}

void ExperimentSources::add_chain_file(std::string_view text, const std::string& name,
                                       const fs::path& base_dir, std::vector<fs::path> chain) {
  const toml::table& document = documents_.emplace_back(parse_toml(text, name));
  if (const toml::node* extends = document.get(kExtendsKey)) {
    const std::string place = place_in(name, extends->source());
    if (!extends->is_string()) {
      throw ConfigError(place +
                        ": extends must be a string, the path of the base experiment "
                        "relative to this file, got " +
                        toml_type_name(*extends));
    }
    const std::string& relative = extends->as_string()->get();
    const fs::path base = (base_dir / relative).lexically_normal();
    std::error_code missing;
    if (!fs::exists(base, missing)) {
      throw ConfigError(place + ": extends '" + relative + "', but " + base.string() +
                        (missing ? ": " + missing.message() : " does not exist"));
    }
    const fs::path canonical = fs::weakly_canonical(base);
    if (std::find(chain.begin(), chain.end(), canonical) != chain.end()) {
      std::string cycle;
      for (const fs::path& file : chain) cycle += file.string() + " -> ";
      throw ConfigError(place + ": extends cycle: " + cycle + canonical.string());
    }
    chain.push_back(canonical);
    add_chain_file(read_text_file(base, place), base.string(), base.parent_path(),
                   std::move(chain));
  }
  // After the bases' keys, so that this file's keys override theirs.
  add_document_keys(document, name);
}

void ExperimentSources::add_document_keys(const toml::table& document, const std::string& name) {
  for (auto&& [section_key, section_node] : document) {
    const std::string section(section_key.str());
    if (section == kExtendsKey) continue;
    const std::string section_place = place_in(name, section_key.source());
    require_known_section(section, section_place);
    const toml::table* table = section_node.as_table();
    if (table == nullptr) {
      throw ConfigError(section_place + ": " + section + " must be a table ([" + section +
                        "]), got " + toml_type_name(section_node));
    }
    add_section_keys(section, *table, name);
  }
}

void ExperimentSources::add_section_keys(const std::string& section, const toml::table& table,
                                         const std::string& name) {
  const PolicySection* policy = find_policy_section(section);
  for (auto&& [key_node, value] : table) {
    const std::string key(key_node.str());
    const std::string subsection = section + "." + key;
    if (value.is_table() && find_policy_section(subsection) != nullptr) {
      add_section_keys(subsection, *value.as_table(), name);
      continue;
    }
    const std::string key_place = place_in(name, key_node.source());
    if (policy != nullptr && value.is_table() && find_field(section, key) == nullptr) {
      // [policies.<kind>.<plugin>]: the key is the plugin's name, its table its parameters.
      add_setting(*policy, key, key_place, "", nullptr, key_place);
      for (auto&& [parameter, parameter_value] : *value.as_table()) {
        add_setting(*policy, key, key_place, std::string(parameter.str()), &parameter_value,
                    place_in(name, parameter_value.source()));
      }
      continue;
    }
    add_key(section, key, value, key_place, place_in(name, value.source()));
  }
}

void ExperimentSources::add_key(const std::string& section, const std::string& key,
                                const toml::node& value, const std::string& key_place,
                                const std::string& value_place) {
  const PolicySection* policy = find_policy_section(section);
  if (policy != nullptr && find_field(section, key) == nullptr &&
      did_you_mean(key, section_keys(section)).empty()) {
    throw ConfigError(misplaced_parameter(*policy, key, key_place));
  }
  const FieldDescriptor& field = known_field(section, key, key_place);
  assignments_.push_back({&field, &value, value_place});
}

void ExperimentSources::add_setting(const PolicySection& policy, const std::string& plugin,
                                    const std::string& plugin_place, const std::string& key,
                                    const toml::node* value, const std::string& value_place) {
  // Checked against the plugin's declaration once the plugins are loaded.
  settings_.push_back({policy.choice, plugin, plugin_place, key, value, value_place});
}

void ExperimentSources::add_override(const std::string& text) {
  const auto equals = text.find('=');
  if (equals == std::string::npos) {
    throw ConfigError("--set " + text + ": no value; " + std::string(kSetForm));
  }
  const std::string name(trim_whitespace(std::string_view(text).substr(0, equals)));
  const std::string value_text(trim_whitespace(std::string_view(text).substr(equals + 1)));
  const std::string place = "--set " + name;
  // A TOML file is UTF-8 by its grammar; a command line can hold any bytes.
  if (!is_valid_utf8(text)) {
    throw ConfigError(place + ": not valid UTF-8; an experiment's names and values are UTF-8 text");
  }
  // The key is after the last dot: cluster.memory_per_rank is in [cluster], and
  // policies.placement.lrmoe.keep_fraction in the lrmoe placement's table.
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) {
    throw ConfigError(place + ": no section; " + std::string(kSetForm));
  }
  const std::string section = name.substr(0, dot);
  const std::string key = name.substr(dot + 1);
  const auto plugin_dot = section.rfind('.');
  const PolicySection* plugin_of = plugin_dot == std::string::npos
                                       ? nullptr
                                       : find_policy_section(section.substr(0, plugin_dot));
  if (plugin_of == nullptr) require_known_section(section, place);
  const FieldDescriptor* field = plugin_of == nullptr ? find_field(section, key) : nullptr;

  // The value is TOML when it parses as TOML, otherwise plain text, so that paths and choice
  // names need no quotes on a command line. For a string field anything is text: a run named
  // 2024 is named "2024". Plugin parameters (no schema field) follow the same rule.
  std::optional<toml::table> parsed = parse_override_value(value_text, place);
  const bool as_text =
      !parsed || !parsed->get("v") ||
      (field != nullptr && field->kind == FieldKind::String && !parsed->get("v")->is_string());
  const toml::table& document =
      documents_.emplace_back(as_text ? toml::table{{"v", value_text}} : std::move(*parsed));
  if (plugin_of != nullptr) {
    add_setting(*plugin_of, section.substr(plugin_dot + 1), place, key, document.get("v"), place);
  } else {
    add_key(section, key, *document.get("v"), place, place);
  }
}

}  // namespace lrmoe
