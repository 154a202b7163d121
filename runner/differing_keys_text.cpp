#include "runner/differing_keys_text.hpp"

#include <fmt/format.h>

#include <set>
#include <utility>

namespace lrmoe {
namespace {

// `keys` less the parameters of plugins that differ; `left_out` says whether any were.
std::vector<std::string> without_plugin_parameters(const std::vector<std::string>& keys,
                                                   bool& left_out) {
  const std::set<std::string> all(keys.begin(), keys.end());
  std::vector<std::string> kept;
  left_out = false;
  for (const std::string& key : keys) {
    bool parameter = false;
    if (key.rfind("policies.", 0) == 0) {
      const std::size_t kind_end = key.find('.', std::string("policies.").size());
      const std::size_t plugin_end =
          kind_end == std::string::npos ? kind_end : key.find('.', kind_end + 1);
      parameter =
          plugin_end != std::string::npos && all.count(key.substr(0, kind_end) + ".name") == 1;
    }
    if (parameter)
      left_out = true;
    else
      kept.push_back(key);
  }
  return kept;
}

}  // namespace

std::string differing_keys_text(const std::vector<std::string>& all_keys) {
  bool parameters_left_out = false;
  const std::vector<std::string> keys = without_plugin_parameters(all_keys, parameters_left_out);
  std::vector<std::pair<std::string, std::vector<std::string>>> by_table;
  for (const std::string& key : keys) {
    const std::size_t dot = key.rfind('.');
    const std::string table = dot == std::string::npos ? "" : key.substr(0, dot + 1);
    if (by_table.empty() || by_table.back().first != table) by_table.push_back({table, {}});
    by_table.back().second.push_back(key.substr(table.size()));
  }
  std::vector<std::string> parts;
  for (const auto& [table, names] : by_table) {
    parts.push_back(names.size() == 1 ? table + names.front()
                                      : fmt::format("{}{{{}}}", table, fmt::join(names, ", ")));
  }
  return fmt::format("{}{}", fmt::join(parts, ", "),
                     parameters_left_out ? " (and the parameters of the plugins that differ)" : "");
}

}  // namespace lrmoe
