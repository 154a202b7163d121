#pragma once
// The experiment schema: one descriptor per TOML key, in the order `to_toml` writes them. Parsing,
// range checks, the resolved TOML and the Markdown reference (`lrmoe schema`) are all driven by
// this table, so a field's name, default, range and meaning are written down exactly once.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/config/experiment.hpp"

namespace lrmoe {

enum class FieldKind { Integer, Float, Bool, String, Choice, ByteSize };

// "integer", "float", "bool", "string", "choice", "byte size".
std::string_view kind_name(FieldKind kind);

// A field's value independent of its C++ member type: int64_t for Integer, double for Float,
// bool for Bool, std::string for String and Choice, uint64_t (bytes) for ByteSize.
using FieldValue = std::variant<int64_t, uint64_t, double, bool, std::string>;

struct Bound {
  double value;
  bool inclusive;
};
constexpr Bound inclusive(double value) {
  return {value, true};
}
constexpr Bound exclusive(double value) {
  return {value, false};
}

// The allowed values of a numeric field; an absent bound does not limit.
struct Range {
  std::optional<Bound> low;
  std::optional<Bound> high;

  bool contains(double value) const;
  // ">= 1", "> 0 and < 1"; "" when unbounded.
  std::string describe() const;
};
inline Range at_least(double value) {
  return {inclusive(value), std::nullopt};
}
inline Range above(double value) {
  return {exclusive(value), std::nullopt};
}
inline Range between(double low, double high) {
  return {inclusive(low), inclusive(high)};
}

struct FieldDescriptor {
  std::string section;
  std::string key;
  FieldKind kind;
  std::string default_text;          // as TOML text, or how the default is chosen
  Range range;                       // Integer, Float and ByteSize
  std::vector<std::string> choices;  // Choice
  std::string meaning;
  std::function<FieldValue(const Experiment&)> read;
  std::function<void(Experiment&, const FieldValue&)> write;

  std::string name() const { return section + "." + key; }  // "model.hidden_size"
};

// Every field, grouped by section, sections in the order experiment, model, data, train,
// cluster, policies (then one per policy kind), store. In [model], `preset` and `hf_config` come
// first and writing one replaces the whole model with its dimensions; every other model field
// defaults to its value.
const std::vector<FieldDescriptor>& experiment_schema();

// The section names of experiment_schema(), in order: "policies.placement" is a section too.
const std::vector<std::string>& section_names();

// The keys of one section, in schema order.
std::vector<std::string> section_keys(std::string_view section);

// nullptr when the section has no such key.
const FieldDescriptor* find_field(std::string_view section, std::string_view key);

// model.preset and model.hf_config: the two sources of a model's dimensions.
const FieldDescriptor& model_preset_field();
const FieldDescriptor& model_hf_config_field();
// Whether `field` is one of them: the last one assigned applies before every other [model] key,
// and an empty one is not written into the resolved TOML.
bool is_model_source(const FieldDescriptor& field);

}  // namespace lrmoe
