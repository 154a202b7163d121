#include "core/config/sweep_spec.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <set>

#include "core/config/config_error.hpp"
#include "core/config/did_you_mean.hpp"
#include "core/config/field_value.hpp"
#include "core/config/multiline_inline_tables.hpp"
#include "core/config/toml_document.hpp"
#include "core/config/toml_text.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

const std::vector<std::string> kTopKeys = {"name", "experiment", "set", "processes", "axis"};
const std::vector<std::string> kAxisKeys = {"key", "keys", "values", "labels", "variants", "kind"};
const std::vector<std::string> kAxisKinds = {"model", "variant", "seed"};
constexpr const char* kSeedKey = "experiment.seed";
// In a variant's table, the variant's name rather than a setting (settings are section.key).
constexpr const char* kLabelKey = "label";

enum class AxisKind { Model, Variant, Seed };

// One axis: its keys, its kind and, per value, one setting per key and the value's label.
struct Axis {
  std::vector<std::string> keys;
  std::vector<std::vector<SweepSetting>> values;
  std::vector<std::string> labels;  // one per value; empty: none given
  AxisKind kind = AxisKind::Variant;
};

// "keep_fraction=0.5, seed=2": the keys' last parts and the values.
std::string settings_label(const std::vector<SweepSetting>& settings) {
  std::string label;
  for (const SweepSetting& s : settings) {
    const std::string last = s.key.substr(s.key.rfind('.') + 1);
    label += (label.empty() ? "" : ", ") + last + "=" + s.text;
  }
  return label;
}

bool is_model_key(const std::string& key) {
  return key.rfind("model.", 0) == 0;
}

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

  std::string place(const toml::node& node) const { return place_in(file_, node.source()); }

  SweepSetting setting(const std::string& key, const toml::node& node) const {
    if (const auto* s = node.as_string())
      return {key, toml_string(s->get()), s->get(), place(node)};
    if (const auto* i = node.as_integer()) {
      const std::string text = std::to_string(i->get());
      return {key, text, text, place(node)};
    }
    if (const auto* f = node.as_floating_point()) {
      const std::string text = toml_float(f->get());
      return {key, text, text, place(node)};
    }
    if (const auto* b = node.as_boolean()) {
      const std::string text = b->get() ? "true" : "false";
      return {key, text, text, place(node)};
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
      const toml::table* given = variant.as_table();
      if (!given || given->empty())
        fail(variant, "each of variants must be a non-empty table of section.key = value");
      // Flattened where it lies: a copy of the table would lose its values' places in the file.
      std::vector<SweepSetting> settings;
      flatten(*given, "", settings);
      std::string label;
      if (const toml::node* name = given->get(kLabelKey)) {
        label = string_of(*name, "a variant's label");
        if (label.empty()) fail(*name, "a variant's label must not be empty");
        settings.erase(std::remove_if(settings.begin(), settings.end(),
                                      [](const SweepSetting& s) { return s.key == kLabelKey; }),
                       settings.end());
        if (settings.empty()) fail(variant, "the variant '" + label + "' sets nothing");
      }
      axis.labels.push_back(label);
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
    Axis axis = table.get("variants") ? variants_axis(table) : values_axis(table);
    axis.kind = kind_of(table, axis.keys);
    return axis;
  }

 private:
  // The axis's kind: as given, else from its keys.
  AxisKind kind_of(const toml::table& table, const std::vector<std::string>& keys) const {
    if (const toml::node* node = table.get("kind")) {
      const std::string kind = string_of(*node, "kind");
      if (kind == "model") return AxisKind::Model;
      if (kind == "variant") return AxisKind::Variant;
      if (kind == "seed") {
        if (keys.size() != 1 || keys.front() != kSeedKey)
          fail(*node, std::string("a seed axis has the one key ") + kSeedKey);
        return AxisKind::Seed;
      }
      fail(*node, "unknown kind '" + kind + "'; use " + quoted_list(kAxisKinds) +
                      did_you_mean(kind, kAxisKinds));
    }
    if (keys.size() == 1 && keys.front() == kSeedKey) return AxisKind::Seed;
    if (std::all_of(keys.begin(), keys.end(), is_model_key)) return AxisKind::Model;
    return AxisKind::Variant;
  }

  // key = "..." or keys = [...], values = [...] and, optionally, labels = [...].
  Axis values_axis(const toml::table& table) const {
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
    axis.labels.assign(axis.values.size(), "");
    if (const toml::node* labels_node = table.get("labels")) {
      const toml::array* labels = labels_node->as_array();
      if (!labels || labels->size() != axis.values.size())
        fail(*labels_node, fmt::format("labels must be an array of {} strings, one per value",
                                       axis.values.size()));
      for (std::size_t i = 0; i < labels->size(); ++i) {
        axis.labels[i] = string_of(*labels->get(i), "each of labels");
        if (axis.labels[i].empty()) fail(*labels->get(i), "a label must not be empty");
      }
    }
    return axis;
  }

  std::string file_;
};

// A value's label: as given, else its settings (a model preset alone: the preset's name).
std::string value_label(const Axis& axis, std::size_t value) {
  if (!axis.labels[value].empty()) return axis.labels[value];
  const std::vector<SweepSetting>& settings = axis.values[value];
  if (axis.kind == AxisKind::Model && settings.size() == 1 &&
      settings.front().key == "model.preset")
    return settings.front().text;
  return settings_label(settings);
}

void append_label(std::string& labels, const std::string& label) {
  labels += (labels.empty() ? "" : ", ") + label;
}

// The cells of the axes' product, the first axis varying slowest.
std::vector<SweepCell> product(const std::vector<Axis>& axes) {
  std::vector<SweepCell> cells(1);
  for (const Axis& axis : axes) {
    std::vector<SweepCell> grown;
    for (const SweepCell& cell : cells) {
      for (std::size_t v = 0; v < axis.values.size(); ++v) {
        SweepCell next = cell;
        next.settings.insert(next.settings.end(), axis.values[v].begin(), axis.values[v].end());
        if (axis.kind == AxisKind::Model) append_label(next.model, value_label(axis, v));
        if (axis.kind == AxisKind::Variant) append_label(next.variant, value_label(axis, v));
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
  return settings_label(settings);
}

std::vector<std::string> SweepSpec::overrides(const SweepCell& cell) const {
  std::vector<std::string> all = set;
  for (const SweepSetting& s : cell.settings) all.push_back(s.key + "=" + s.toml);
  return all;
}

std::string SweepSpec::place_of(const SweepCell& cell, const std::string& error) const {
  // Loading reports an override's mistake as "--set KEY: ..." (or "--set KEY=...").
  auto names = [&](const std::string& key) {
    const std::string quoted = "--set " + key;
    const std::size_t at = error.find(quoted);
    if (at == std::string::npos) return false;
    const std::size_t end = at + quoted.size();
    return end == error.size() || error[end] == ':' || error[end] == '=' || error[end] == ' ';
  };
  for (const SweepSetting& s : cell.settings)
    if (names(s.key)) return s.place;
  for (std::size_t i = 0; i < set.size(); ++i)
    if (names(set[i].substr(0, set[i].find('=')))) return set_places[i];
  return file;
}

std::string sweep_name_problem(const std::string& name) {
  if (name.empty()) return "a sweep's name must not be empty";
  if (name.size() > 100) return "a sweep's name must be at most 100 bytes";
  if (name.front() == '.') return "a sweep's name must not start with a dot";
  for (const char c : name) {
    if (c == '/' || c == '\\')
      return "a sweep's name must not hold a path separator (it names a folder of logs)";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return "a sweep's name must not hold a control character";
  }
  return "";
}

SweepSpec load_sweep_spec(const fs::path& file) {
  SweepSpec spec;
  spec.file = file.lexically_normal().string();
  const toml::table document =
      parse_toml(join_multiline_inline_tables(read_text_file(file, spec.file)), spec.file);
  const SweepReader reader(spec.file);
  reader.require_known_keys(document, kTopKeys, "in a sweep file");

  spec.name = file.stem().string();
  if (const toml::node* name = document.get("name")) {
    spec.name = reader.string_of(*name, "name");
    if (const std::string problem = sweep_name_problem(spec.name); !problem.empty())
      reader.fail(*name, problem);
  } else if (const std::string problem = sweep_name_problem(spec.name); !problem.empty()) {
    throw ConfigError(spec.file + ": " + problem + "; give one: name = \"...\"");
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
    for (const toml::node& item : *list) {
      spec.set.push_back(reader.string_of(item, "each of set"));
      spec.set_places.push_back(reader.place(item));
    }
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
