#include "core/cost/hardware_profile_file.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "core/config/did_you_mean.hpp"
#include "core/config/experiment_loader.hpp"
#include "core/config/field_value.hpp"
#include "core/config/toml_limits.hpp"
#include "core/config/toml_text.hpp"
#include "core/system/one_line.hpp"

namespace fs = std::filesystem;

namespace lrmoe::profile_file {

// Rows are counts: written as integers when they are whole numbers TOML can hold exactly.
std::string format_rows(double rows) {
  if (std::isfinite(rows) && rows == std::floor(rows) && std::fabs(rows) < 9.0e15) {
    return fmt::format("{}", static_cast<int64_t>(rows));
  }
  return toml_float(rows);
}

// " (did you mean 'x'?)" when one of `candidates` is a likely typo of `word`, otherwise "".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string text = did_you_mean(word, candidates);  // "; did you mean 'x'?"
  return text.empty() ? "" : " (" + text.substr(2) + ")";
}

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument(one_line(message));
}

namespace {

constexpr const char* kFormatHint = "experiments/hardware/README.md describes every key";

// The keys of a profile file, in the order to_toml writes them, with what each one means.
struct KeyInfo {
  const char* key;
  const char* meaning;
};
const std::vector<KeyInfo>& profile_keys() {
  static const std::vector<KeyInfo> keys = {
      {"name", "the file's stem"},
      {"description", "one line on the hardware"},
      {"peak_flops", "dense GEMM FLOP/s of one rank"},
      {"gemm_efficiency", "[rows, efficiency] pairs"},
      {"memory_bandwidth", "device memory bytes/s"},
      {"element_bytes", "bytes per element at the training precision"},
      {"ranks_per_node", "ranks (GPUs) per node"},
      {"intra_node_bandwidth", "bytes/s one rank sends to ranks on its node"},
      {"intra_node_latency", "seconds per message to a rank on its node"},
      {"inter_node_bandwidth", "bytes/s one rank sends to ranks on other nodes"},
      {"inter_node_latency", "seconds per message to a rank on another node"},
      {"host_link_bandwidth", "bytes/s between a rank's host memory and its device"},
  };
  return keys;
}

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const KeyInfo& info : profile_keys()) names.emplace_back(info.key);
  return names;
}

// toml_type_name with its article: "a string", "an integer".
std::string type_name(const toml::node& node) {
  const std::string name = toml_type_name(node);
  return (std::string_view("aeiou").find(name.front()) == std::string_view::npos ? "a " : "an ") +
         name;
}

std::string place(const std::string& file, const toml::node& node) {
  const toml::source_position begin = node.source().begin;
  if (begin.line == 0) return file;
  return fmt::format("{}:{}:{}", file, begin.line, begin.column);
}

// Reads one profile document, checking each key as it goes.
class ProfileReader {
 public:
  ProfileReader(std::string file, const toml::table& table)
      : file_(std::move(file)), table_(table) {}

  void reject_unknown_keys() const {
    const std::vector<std::string> known = key_names();
    for (const auto& [key, node] : table_) {
      const std::string name(key.str());
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      fail(fmt::format(
          "{}: unknown key '{}'{}; remove it or fix its spelling: the keys of a hardware profile "
          "are {} "
          "({})",
          place_of_key(key, node), name, suggestion(name, known), quoted_list(known), kFormatHint));
    }
  }

  const toml::node& require(const char* key) const {
    const toml::node* node = table_.get(key);
    if (!node) {
      fail(fmt::format("{}: missing key '{}' ({}); add it ({})", file_, key, meaning(key),
                       kFormatHint));
    }
    return *node;
  }

  std::string text(const char* key) const {
    const toml::node& node = require(key);
    if (const auto* value = node.as_string()) return value->get();
    fail(fmt::format("{}: {} must be a string, not {}; write it in quotes, e.g. {} = \"...\"",
                     place(file_, node), key, type_name(node), key));
  }

  // A number (integer or float) as a double.
  double number(const toml::node& node, const std::string& what, const char* example) const {
    if (const auto* value = node.as_integer()) return static_cast<double>(value->get());
    if (const auto* value = node.as_floating_point()) return value->get();
    fail(fmt::format("{}: {} must be a number, not {}; e.g. {}", place(file_, node), what,
                     type_name(node), example));
  }

  double positive(const char* key, const char* unit, const char* example) const {
    const toml::node& node = require(key);
    const double value = number(node, key, example);
    if (!(std::isfinite(value) && value > 0)) {
      fail(fmt::format(
          "{}: {} = {} is out of range: it must be a finite number of {} greater than 0; e.g. {}",
          place(file_, node), key, toml_float(value), unit, example));
    }
    return value;
  }

  double non_negative(const char* key, const char* unit, const char* example) const {
    const toml::node& node = require(key);
    const double value = number(node, key, example);
    if (!(std::isfinite(value) && value >= 0)) {
      fail(fmt::format(
          "{}: {} = {} is out of range: it must be a finite number of {}, 0 or more; e.g. {}",
          place(file_, node), key, toml_float(value), unit, example));
    }
    return value;
  }

  int64_t integer(const char* key, const char* example) const {
    const toml::node& node = require(key);
    if (const auto* value = node.as_integer()) return value->get();
    fail(fmt::format("{}: {} must be an integer, not {}; e.g. {}", place(file_, node), key,
                     type_name(node), example));
  }

  std::vector<GemmEfficiencyPoint> curve(const char* key) const {
    const toml::node& node = require(key);
    constexpr const char* kExample = "gemm_efficiency = [[16, 0.1], [128, 0.78]]";
    const toml::array* array = node.as_array();
    if (!array) {
      fail(fmt::format("{}: {} must be an array of [rows, efficiency] pairs, not {}; e.g. {}",
                       place(file_, node), key, type_name(node), kExample));
    }
    if (array->empty()) {
      fail(fmt::format("{}: {} is empty; give at least one [rows, efficiency] pair, e.g. {}",
                       place(file_, node), key, kExample));
    }
    std::vector<GemmEfficiencyPoint> points;
    for (std::size_t i = 0; i < array->size(); ++i) {
      const toml::node& item = *array->get(i);
      const std::string what = fmt::format("{}[{}]", key, i);
      const toml::array* pair = item.as_array();
      if (!pair || pair->size() != 2) {
        fail(fmt::format("{}: {} must be a [rows, efficiency] pair of two numbers, not {}; e.g. {}",
                         place(file_, item), what,
                         pair ? fmt::format("{} values", pair->size()) : type_name(item),
                         kExample));
      }
      GemmEfficiencyPoint point;
      point.rows = number(*pair->get(0), what + " rows", kExample);
      point.efficiency = number(*pair->get(1), what + " efficiency", kExample);
      if (!(std::isfinite(point.rows) && point.rows > 0)) {
        fail(fmt::format("{}: {} rows = {} is out of range: rows must be greater than 0",
                         place(file_, *pair->get(0)), what, toml_float(point.rows)));
      }
      if (!points.empty() && !(point.rows > points.back().rows)) {
        fail(fmt::format(
            "{}: {} rows = {} does not follow {}; list the pairs by strictly increasing rows",
            place(file_, *pair->get(0)), what, format_rows(point.rows),
            format_rows(points.back().rows)));
      }
      if (!(point.efficiency > 0 && point.efficiency <= 1)) {
        fail(fmt::format(
            "{}: {} efficiency = {} is out of range: it is a fraction of peak_flops in (0, 1]",
            place(file_, *pair->get(1)), what, toml_float(point.efficiency)));
      }
      points.push_back(point);
    }
    return points;
  }

  const std::string& file() const { return file_; }

  std::string place_of_key(const toml::key& key, const toml::node& value) const {
    const toml::source_position begin = key.source().begin;
    if (begin.line == 0) return place(file_, value);
    return fmt::format("{}:{}:{}", file_, begin.line, begin.column);
  }

 private:
  static const char* meaning(const char* key) {
    for (const KeyInfo& info : profile_keys()) {
      if (std::string_view(info.key) == key) return info.meaning;
    }
    return "?";
  }

  std::string file_;
  const toml::table& table_;
};

}  // namespace

HardwareProfile read_profile(const fs::path& path) {
  const std::string file = path.string();
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    fail(fmt::format(
        "{}: cannot read this hardware profile ({}); check the path, or name a profile in {}", file,
        fs::exists(path, error) ? "not a regular file" : "no such file", "experiments/hardware"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf())) {
    fail(fmt::format(
        "{}: cannot read this hardware profile (permission denied or I/O error); check the file's "
        "permissions",
        file));
  }
  toml::table table;
  try {
    check_toml_limits(bytes.str(), file);
    table = toml::parse(bytes.str(), file);
  } catch (const toml::parse_error& e) {
    fail(fmt::format("{}:{}:{}: {}; fix the TOML syntax ({})", file, e.source().begin.line,
                     e.source().begin.column, e.description(), kFormatHint));
  } catch (const ConfigError& e) {
    fail(e.what());  // a limit of toml_limits.hpp
  }

  ProfileReader reader(file, table);
  reader.reject_unknown_keys();
  HardwareProfile profile;
  profile.source = file;
  profile.name = reader.text("name");
  const std::string stem = path.stem().string();
  if (profile.name != stem) {
    fail(
        fmt::format("{}: name = \"{}\" differs from the file name \"{}\"; a profile is found by "
                    "its file name, so "
                    "make them the same",
                    place(file, reader.require("name")), profile.name, stem));
  }
  profile.description = reader.text("description");
  profile.peak_flops = reader.positive("peak_flops", "FLOP/s", "peak_flops = 989e12");
  profile.gemm_efficiency = reader.curve("gemm_efficiency");
  profile.memory_bandwidth =
      reader.positive("memory_bandwidth", "bytes/s", "memory_bandwidth = 3.35e12");
  {
    profile.element_bytes = reader.integer("element_bytes", "element_bytes = 2");
    if (profile.element_bytes != 1 && profile.element_bytes != 2 && profile.element_bytes != 4) {
      fail(fmt::format(
          "{}: element_bytes = {} is out of range: it must be 1 (fp8), 2 (bf16/fp16) or 4 (fp32)",
          place(file, reader.require("element_bytes")), profile.element_bytes));
    }
  }
  {
    profile.ranks_per_node = reader.integer("ranks_per_node", "ranks_per_node = 8");
    if (profile.ranks_per_node < 1) {
      fail(fmt::format("{}: ranks_per_node = {} is out of range: a node holds at least 1 rank",
                       place(file, reader.require("ranks_per_node")), profile.ranks_per_node));
    }
  }
  profile.intra_node_bandwidth =
      reader.positive("intra_node_bandwidth", "bytes/s", "intra_node_bandwidth = 370e9");
  profile.intra_node_latency =
      reader.non_negative("intra_node_latency", "seconds", "intra_node_latency = 3.5e-6");
  profile.inter_node_bandwidth =
      reader.positive("inter_node_bandwidth", "bytes/s", "inter_node_bandwidth = 48e9");
  profile.inter_node_latency =
      reader.non_negative("inter_node_latency", "seconds", "inter_node_latency = 14e-6");
  profile.host_link_bandwidth =
      reader.positive("host_link_bandwidth", "bytes/s", "host_link_bandwidth = 52.8e9");
  return profile;
}

}  // namespace lrmoe::profile_file
