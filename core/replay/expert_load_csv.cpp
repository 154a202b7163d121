#include "core/replay/expert_load_csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace lrmoe {
namespace {

constexpr std::array<const char*, 4> kColumns = {"step", "layer", "expert", "pairs"};

struct Row {
  std::array<int64_t, 4> value;  // in kColumns' order
  int64_t line;
};

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  return std::string(text.substr(first, text.find_last_not_of(" \t\r") - first + 1));
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(trimmed(std::string_view(line).substr(start, comma - start)));
    if (comma == std::string::npos) return fields;
    start = comma + 1;
  }
}

}  // namespace

RecordedExpertLoads read_expert_load_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot be read", path));
  auto fail = [&](int64_t line, const std::string& what) {
    return std::invalid_argument(fmt::format("{}:{}: {}", path, line, what));
  };
  std::string line;
  int64_t number = 0;
  // The header: where each column is.
  std::array<std::size_t, 4> column{};
  std::size_t fields = 0;
  while (std::getline(in, line)) {
    ++number;
    if (trimmed(line).empty()) continue;
    const std::vector<std::string> names = split_fields(line);
    fields = names.size();
    for (std::size_t c = 0; c < kColumns.size(); ++c) {
      const auto found = std::find(names.begin(), names.end(), kColumns[c]);
      if (found == names.end())
        throw fail(number, fmt::format("the header names no column '{}'; it needs step, layer, "
                                       "expert and pairs (any order)",
                                       kColumns[c]));
      if (std::find(found + 1, names.end(), kColumns[c]) != names.end())
        throw fail(number, fmt::format("the header names column '{}' twice", kColumns[c]));
      column[c] = static_cast<std::size_t>(found - names.begin());
    }
    break;
  }
  if (fields == 0)
    throw std::invalid_argument(
        fmt::format("{}: empty; it needs a header line step,layer,expert,pairs and rows", path));

  std::vector<Row> rows;
  while (std::getline(in, line)) {
    ++number;
    if (trimmed(line).empty()) continue;
    const std::vector<std::string> cells = split_fields(line);
    if (cells.size() != fields)
      throw fail(number, fmt::format("{} cells where the header has {}", cells.size(), fields));
    Row row{{}, number};
    for (std::size_t c = 0; c < kColumns.size(); ++c) {
      const std::string& cell = cells[column[c]];
      int64_t value = -1;
      const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
      if (error != std::errc() || end != cell.data() + cell.size() || value < 0)
        throw fail(number, fmt::format("{} '{}' is not a whole number >= 0 (within int64)",
                                       kColumns[c], cell));
      row.value[c] = value;
    }
    if (row.value[2] >= kMostLoadCells)
      throw fail(number, fmt::format("expert {} is past the {} experts a load file may name",
                                     row.value[2], kMostLoadCells));
    if (row.value[3] > kMostPairs)
      throw fail(number, fmt::format("{} pairs are more than the {} one expert's load may hold",
                                     row.value[3], kMostPairs));
    if (static_cast<int64_t>(rows.size()) >= kMostLoadCells)
      throw fail(number, fmt::format("more than {} rows; split the file", kMostLoadCells));
    rows.push_back(row);
  }
  if (rows.empty()) throw fail(number, "no rows of loads after the header");

  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tie(a.value[0], a.value[1], a.value[2], a.line) <
           std::tie(b.value[0], b.value[1], b.value[2], b.line);
  });
  int64_t experts = 0;
  for (const Row& row : rows) experts = std::max(experts, row.value[2] + 1);
  RecordedExpertLoads loads;
  loads.origin = path;
  std::vector<int64_t> first_layers, layers;  // the first step's layers, this step's
  int64_t held = 0;                           // loads allocated so far
  auto other_layers = [&](int64_t line) {
    return fail(line, fmt::format("step {} lists other MoE layers than step {}; every step lists "
                                  "the same layers",
                                  loads.steps.back(), loads.steps.front()));
  };
  auto close_step = [&](int64_t line) {
    if (loads.steps.size() == 1) first_layers = layers;
    if (layers != first_layers) throw other_layers(line);
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const int64_t step = row.value[0], layer = row.value[1], expert = row.value[2];
    if (i > 0 && rows[i - 1].value[0] == step && rows[i - 1].value[1] == layer &&
        rows[i - 1].value[2] == expert)
      throw fail(row.line, fmt::format("step {}, layer {}, expert {} again (first at line {})",
                                       step, layer, expert, rows[i - 1].line));
    if (loads.steps.empty() || loads.steps.back() != step) {
      if (!loads.steps.empty()) close_step(rows[i - 1].line);
      loads.steps.push_back(step);
      loads.pairs.emplace_back();
      layers.clear();
    }
    if (layers.empty() || layers.back() != layer) {
      // A later step may only repeat the first step's layers, checked as each one starts, so
      // that nothing is allocated for a layer that will be refused.
      if (loads.steps.size() > 1 &&
          (layers.size() >= first_layers.size() || first_layers[layers.size()] != layer))
        throw other_layers(row.line);
      held += experts;
      if (held > kMostLoadCells)
        throw fail(row.line, fmt::format("{} experts over the layers and steps so far are more "
                                         "than the {} loads a load file may hold; split the file",
                                         experts, kMostLoadCells));
      layers.push_back(layer);
      loads.pairs.back().emplace_back(static_cast<std::size_t>(experts), 0);
    }
    loads.pairs.back().back()[static_cast<std::size_t>(expert)] = row.value[3];
  }
  close_step(rows.back().line);
  return loads;
}

void write_expert_load_csv(const RecordedExpertLoads& loads, std::ostream& out) {
  out << "step,layer,expert,pairs\n";
  for (std::size_t s = 0; s < loads.steps.size(); ++s)
    for (std::size_t l = 0; l < loads.pairs[s].size(); ++l)
      for (std::size_t e = 0; e < loads.pairs[s][l].size(); ++e)
        out << loads.steps[s] << ',' << l << ',' << e << ',' << loads.pairs[s][l][e] << '\n';
}

}  // namespace lrmoe
