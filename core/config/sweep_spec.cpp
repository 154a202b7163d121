#include "core/config/sweep_spec.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <set>

#include "core/config/did_you_mean.hpp"
#include "core/config/experiment_loader.hpp"
#include "core/config/field_value.hpp"
#include "core/config/toml_document.hpp"
#include "core/config/toml_text.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

const std::vector<std::string> kTopKeys = {"name", "experiment", "set", "processes", "axis"};
const std::vector<std::string> kAxisKeys = {"key", "keys", "values", "variants"};

// One axis: its keys and, per value, one setting per key.
struct Axis {
  std::vector<std::string> keys;
  std::vector<std::vector<SweepSetting>> values;
};

class SweepReader {
 public:
  explicit SweepReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::node& node, const std::string& what) const {
    throw ConfigError(place_in(file_, node.source()) + ": " + what);
  }

  void require_known_keys(const toml::table& table, const std::vector<std::string>& known,
                          const std::string& where) const {
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      const std::string suggestion = did_you_mean(name, known);
      fail(node, "unknown key '" + name + "' " + where +
                     (suggestion.empty() ? "; valid keys: " + quoted_list(known) : suggestion));
    }
  }

  std::string string_of(const toml::node& node, const std::string& what) const {
    if (!node.is_string()) fail(node, what + " must be a string, got " + toml_type_name(node));
    return *node.value<std::string>();
  }

  SweepSetting setting(const std::string& key, const toml::node& node) const {
    if (const auto* s = node.as_string()) return {key, toml_string(s->get()), s->get()};
    if (const auto* i = node.as_integer()) {
      const std::string text = std::to_string(i->get());
      return {key, text, text};
    }
    if (const auto* f = node.as_floating_point()) {
      const std::string text = toml_float(f->get());
      return {key, text, text};
    }
    if (const auto* b = node.as_boolean()) {
      const std::string text = b->get() ? "true" : "false";
      return {key, text, text};
    }
    fail(node, "a value of " + key + " must be a string, integer, float or boolean, got " +
                   toml_type_name(node));
  }

  // `prefix` and the keys of `table`, nested tables flattened: {policies = {bundle = "x"}} and
  // {"policies.bundle" = "x"} both give policies.bundle.
  void flatten(const toml::table& table, const std::string& prefix,
               std::vector<SweepSetting>& settings) const {
    for (const auto& [key, node] : table) {
      const std::string name = prefix + std::string(key.str());
      if (const toml::table* inner = node.as_table()) {
        flatten(*inner, name + ".", settings);
      } else {
        settings.push_back(setting(name, node));
      }
    }
  }

  // variants = [{...}, ...]: each value its own settings, keys free to differ between values.
  Axis variants_axis(const toml::table& table) const {
    for (const char* other : {"key", "keys", "values"}) {
      if (const toml::node* node = table.get(other))
        fail(*node, std::string("an [[axis]] with variants has no ") + other +
                        ": each variant names its own keys");
    }
    const toml::node* node = table.get("variants");
    const toml::array* variants = node->as_array();
    if (!variants || variants->empty())
      fail(*node, "variants must be a non-empty array of tables: [{ \"section.key\" = value }]");
    Axis axis;
    for (const toml::node& variant : *variants) {
      const toml::table* settings_table = variant.as_table();
      if (!settings_table || settings_table->empty())
        fail(variant, "each of variants must be a non-empty table of section.key = value");
      std::vector<SweepSetting> settings;
      flatten(*settings_table, "", settings);
      for (const SweepSetting& s : settings) {
        if (std::find(axis.keys.begin(), axis.keys.end(), s.key) == axis.keys.end())
          axis.keys.push_back(s.key);
      }
      axis.values.push_back(std::move(settings));
    }
    return axis;
  }

  Axis axis(const toml::table& table) const {
    require_known_keys(table, kAxisKeys, "in [[axis]]");
    if (table.get("variants")) return variants_axis(table);
    Axis axis;
    const toml::node* key = table.get("key");
    const toml::node* keys = table.get("keys");
    if ((key != nullptr) == (keys != nullptr))
      fail(table,
           "an [[axis]] needs one of key = \"section.key\", keys = [...] or variants = [...]");
    if (key) {
      axis.keys.push_back(string_of(*key, "key"));
    } else {
      const toml::array* names = keys->as_array();
      if (!names || names->empty()) fail(*keys, "keys must be a non-empty array of strings");
      for (const toml::node& name : *names) axis.keys.push_back(string_of(name, "each of keys"));
    }
    const toml::node* values_node = table.get("values");
    if (!values_node) fail(table, "an [[axis]] needs values = [...]");
    const toml::array* values = values_node->as_array();
    if (!values || values->empty()) fail(*values_node, "values must be a non-empty array");
    for (const toml::node& value : *values) {
      std::vector<SweepSetting> settings;
      if (key) {
        settings.push_back(setting(axis.keys.front(), value));
      } else {
        const toml::array* tuple = value.as_array();
        if (!tuple || tuple->size() != axis.keys.size())
          fail(value, fmt::format("each of values must be an array of {} values, one per key",
                                  axis.keys.size()));
        for (std::size_t k = 0; k < tuple->size(); ++k)
          settings.push_back(setting(axis.keys[k], *tuple->get(k)));
      }
      axis.values.push_back(std::move(settings));
    }
    return axis;
  }

 private:
  std::string file_;
};

// The cells of the axes' product, the first axis varying slowest.
std::vector<SweepCell> product(const std::vector<Axis>& axes) {
  std::vector<SweepCell> cells(1);
  for (const Axis& axis : axes) {
    std::vector<SweepCell> grown;
    for (const SweepCell& cell : cells) {
      for (const std::vector<SweepSetting>& value : axis.values) {
        SweepCell next = cell;
        next.settings.insert(next.settings.end(), value.begin(), value.end());
        grown.push_back(std::move(next));
      }
    }
    cells = std::move(grown);
  }
  for (std::size_t i = 0; i < cells.size(); ++i) cells[i].index = static_cast<int64_t>(i);
  return cells;
}

}  // namespace

std::string SweepCell::label() const {
  std::string label;
  for (const SweepSetting& s : settings) {
    const std::string last = s.key.substr(s.key.rfind('.') + 1);
    label += (label.empty() ? "" : ", ") + last + "=" + s.text;
  }
  return label;
}

std::vector<std::string> SweepSpec::overrides(const SweepCell& cell) const {
  std::vector<std::string> all = set;
  for (const SweepSetting& s : cell.settings) all.push_back(s.key + "=" + s.toml);
  return all;
}

SweepSpec load_sweep_spec(const fs::path& file) {
  SweepSpec spec;
  spec.file = file.lexically_normal().string();
  const toml::table document = parse_toml(read_text_file(file, spec.file), spec.file);
  const SweepReader reader(spec.file);
  reader.require_known_keys(document, kTopKeys, "in a sweep file");

  spec.name = file.stem().string();
  if (const toml::node* name = document.get("name")) {
    spec.name = reader.string_of(*name, "name");
    if (spec.name.empty()) reader.fail(*name, "name must not be empty");
  }
  const toml::node* experiment = document.get("experiment");
  if (!experiment)
    throw ConfigError(spec.file +
                      ": no experiment; name the base experiment: experiment = \"FILE.toml\" "
                      "(relative to the sweep file)");
  spec.experiment =
      (file.parent_path() / reader.string_of(*experiment, "experiment")).lexically_normal();
  if (const toml::node* set = document.get("set")) {
    const toml::array* list = set->as_array();
    if (!list) reader.fail(*set, "set must be an array of \"section.key=value\" strings");
    for (const toml::node& item : *list) spec.set.push_back(reader.string_of(item, "each of set"));
  }
  if (const toml::node* processes = document.get("processes")) {
    const std::optional<int64_t> count = processes->value<int64_t>();
    if (!processes->is_integer() || !count || *count < 1)
      reader.fail(*processes, "processes must be an integer of at least 1");
    spec.processes = *count;
  }

  const toml::node* axes_node = document.get("axis");
  const toml::array* axes = axes_node ? axes_node->as_array() : nullptr;
  if (!axes || axes->empty() || !axes->is_array_of_tables())
    throw ConfigError(spec.file +
                      ": no [[axis]] tables; give at least one: [[axis]] key = \"section.key\" "
                      "values = [...]");
  std::vector<Axis> parsed;
  std::set<std::string> seen;
  for (const toml::node& table : *axes) {
    Axis axis = reader.axis(*table.as_table());
    for (const std::string& key : axis.keys) {
      if (!seen.insert(key).second)
        reader.fail(table, "the key " + key + " is in two axes; zip them into one with keys");
    }
    parsed.push_back(std::move(axis));
  }
  spec.cells = product(parsed);
  return spec;
}

}  // namespace lrmoe
