#pragma once
// Where an experiment's values come from: the `extends` chain of TOML files and the `--set`
// overrides, flattened into the list of assignments to apply, in order. The TOML documents are
// kept rather than merged, so that every assignment still knows its file, line and column.

#include <toml++/toml.h>

#include <deque>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/experiment_schema.hpp"
#include "core/config/policy_sections.hpp"

namespace lrmoe {

// One `section.key = value` and where it was written.
struct Assignment {
  const FieldDescriptor* field;
  const toml::node* value;  // owned by the ExperimentSources that made the assignment
  std::string place;        // "FILE:LINE:COLUMN" or "--set section.key"
};

// One parameter of a policy plugin, `[policies.<kind>.<plugin>] key = value`, and where it was
// written; or, with no key and no value, a plugin's table named with nothing in it.
struct SettingAssignment {
  PolicyChoice PoliciesConfig::*choice;
  std::string plugin;
  std::string plugin_place;  // where the plugin's table was named
  std::string key;
  const toml::node* value;  // owned by the ExperimentSources that made the assignment
  std::string place;
};

class ExperimentSources {
 public:
  // The experiment file and, before its own keys, those of the files it extends.
  static ExperimentSources from_file(const std::filesystem::path& file);
  // TOML text that is not a file; `name` stands for it in messages, `extends` is resolved
  // against `base_dir`.
  static ExperimentSources from_text(std::string_view text, const std::string& name,
                                     const std::filesystem::path& base_dir);

  // A "section.key=value" override, applied after everything added before it.
  void add_override(const std::string& text);

  // In the order to apply them: the root base file's keys first, the last override last.
  const std::vector<Assignment>& assignments() const { return assignments_; }
  // Policy plugin parameters, in the same order.
  const std::vector<SettingAssignment>& settings() const { return settings_; }
  // The file (or text name) the experiment was loaded from: the leaf of the chain.
  const std::string& experiment_name() const { return experiment_name_; }

 private:
  explicit ExperimentSources(std::string experiment_name);

  // Parses one file of the chain, follows its `extends` first, then adds its own keys.
  // `chain` holds the files already on the way from the leaf, for cycle detection.
  void add_chain_file(std::string_view text, const std::string& name,
                      const std::filesystem::path& base_dir,
                      std::vector<std::filesystem::path> chain);
  void add_document_keys(const toml::table& document, const std::string& name);
  // The keys of one section's table; a sub-table may be a section of its own ([policies.x]),
  // and a sub-table of a [policies.<kind>] table is a plugin's parameters.
  void add_section_keys(const std::string& section, const toml::table& table,
                        const std::string& name);
  // `section.key = value`: a schema field. An unknown key is reported at `key_place`, a bad
  // value (later) at `value_place`.
  void add_key(const std::string& section, const std::string& key, const toml::node& value,
               const std::string& key_place, const std::string& value_place);
  // `[policies.<kind>.<plugin>] key = value`; with no value, the table named alone.
  void add_setting(const PolicySection& policy, const std::string& plugin,
                   const std::string& plugin_place, const std::string& key, const toml::node* value,
                   const std::string& value_place);

  // std::deque: adding a document leaves the nodes of earlier ones where they are.
  std::deque<toml::table> documents_;
  std::vector<Assignment> assignments_;
  std::vector<SettingAssignment> settings_;
  std::string experiment_name_;
};

}  // namespace lrmoe
