#pragma once
// Sample records for results-store tests, and short ways to read a store's answers: one cell of a
// query, a row as text, the message of the StoreError an action throws, a timestamp's format.

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "store/results_store.hpp"

namespace lrmoe_test {

inline lrmoe::RunInfo sample_run(const std::string& name) {
  lrmoe::RunInfo info;
  info.name = name;
  info.resolved_toml = "[experiment]\nname = \"" + name + "\"\n";
  info.toml_sha256 = "3f1c";
  info.code_version = "v0.1.0-test";
  info.torch_version = "1.13.1";
  info.blas = "openblas";
  info.seed = 0xFEDCBA9876543210ULL;  // above INT64_MAX: checks the bit-pattern round trip
  info.params_total = 1'000'000;
  info.params_active = 250'000;
  info.ranks = 4;
  info.policies = "fixed_ownership/gate/keep_all/owner";
  info.target_loss = 2.5;
  return info;
}

inline lrmoe::StepRecord sample_step(int64_t step, std::optional<double> eval_loss = std::nullopt) {
  lrmoe::StepRecord record;
  record.step = step;
  record.train_loss = 10.0 - 0.01 * static_cast<double>(step);
  record.eval_loss = eval_loss;
  record.lr = 3e-4;
  record.grad_norm = 1.25;
  record.tokens = 4096;
  record.step_seconds = 0.5;
  record.moe_seconds = 0.2;
  record.moe_modeled_seconds = 0.0625;
  return record;
}

// Every field differs from the others, so that two swapped columns show.
inline lrmoe::LayerStepRecord sample_layer_step(int64_t step, int64_t layer) {
  lrmoe::LayerStepRecord record;
  record.step = step;
  record.layer = layer;
  record.pairs_routed = 100;
  record.pairs_dropped = 3;
  record.pairs_kept = 90;
  record.replicas = 2;
  record.forward_load_max = 40;
  record.forward_load_mean = 24.25;
  record.backward_load_max = 30;
  record.backward_load_mean = 22.5;
  record.bytes_forward_dispatch = 1001;
  record.bytes_forward_combine = 1002;
  record.bytes_backward_dispatch = 1003;
  record.bytes_backward_return = 1004;
  record.bytes_replica_sync = 1005;
  record.forward_seconds = 0.5;
  record.backward_seconds = 0.75;
  record.modeled_seconds = 0.375;
  record.placement_seconds = 0.0625;
  record.measured_exchange_bytes = 2048;
  record.measured_exchange_seconds = 0.5;
  record.placement_information = "this pass";
  record.metric_seconds = 0.03125;
  record.selection_seconds = 0.015625;
  record.routing_seconds = 0.125;
  record.compaction_seconds = 0.25;
  return record;
}

// The one cell of a one-row, one-column query.
inline std::string scalar(const lrmoe::ResultsStore& store, const std::string& sql) {
  const lrmoe::QueryResult result = store.query(sql);
  REQUIRE(result.rows.size() == 1);
  REQUIRE(result.rows[0].size() == 1);
  REQUIRE(result.rows[0][0].has_value());
  return *result.rows[0][0];
}

// A query row as "a|NULL|c". (Catch cannot print a vector of optionals: LibTorch's glog brings
// an operator<< for vectors that does not compile for them.)
inline std::string row_text(const std::vector<std::optional<std::string>>& row) {
  std::string text;
  for (size_t i = 0; i < row.size(); ++i) text += (i ? "|" : "") + row[i].value_or("NULL");
  return text;
}

// The message of the StoreError that `action` throws; any other outcome fails the test.
template <typename Action>
std::string store_error_of(Action&& action) {
  try {
    action();
  } catch (const lrmoe::StoreError& error) {
    return error.what();
  }
  FAIL("expected a StoreError");
  return {};
}

inline bool is_utc_timestamp(const std::string& text) {
  static const std::regex pattern(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  return std::regex_match(text, pattern);
}

}  // namespace lrmoe_test
