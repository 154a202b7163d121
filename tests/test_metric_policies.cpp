// The built-in metric plugins: the per-pair formulas of gate, gate_grad_norm and
// grad_contribution, and the random metric's distribution and determinism per seed.

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/builtin_policies.hpp"

using lrmoe::PairBatch;
using lrmoe_test::load;
using lrmoe_test::pair_batch;
using lrmoe_test::to_floats;

TEST_CASE("Metrics compute their formulas per pair", "[policies]") {
  PairBatch pairs = pair_batch({2, 1}, {2, 1});
  pairs.gates = at::tensor({0.5F, 0.25F, 1.0F});
  pairs.upstream_norm = at::tensor({2.0F, 4.0F, 0.0F});
  pairs.input_norm = at::tensor({3.0F, 1.0F, 5.0F});
  const auto score = [&](const std::string& name) {
    return to_floats(load<lrmoe::MetricPolicy>(name)->score(pairs));
  };

  CHECK(score("gate") == std::vector<float>{0.5F, 0.25F, 1.0F});
  CHECK(score("gate_grad_norm") == std::vector<float>{1.0F, 1.0F, 0.0F});
  // Without |h|: g * |d| * |x|.
  CHECK(score("grad_contribution") == std::vector<float>{3.0F, 1.0F, 0.0F});
  // With |h|: g * |d| * |h|.
  pairs.hidden_norm = at::tensor({10.0F, 0.5F, 2.0F});
  CHECK(score("grad_contribution") == std::vector<float>{10.0F, 0.5F, 0.0F});
  CHECK(load<lrmoe::MetricPolicy>("gate")->score(pairs).scalar_type() == at::kFloat);
}

TEST_CASE("The random metric is uniform and deterministic per seed", "[policies]") {
  PairBatch pairs = pair_batch({500, 500}, {500, 500});
  const auto metric = load<lrmoe::MetricPolicy>("random");
  const at::Tensor first = metric->score(pairs);
  REQUIRE(first.scalar_type() == at::kFloat);
  REQUIRE(first.numel() == 1000);
  CHECK(first.min().item<float>() >= 0.0F);
  CHECK(first.max().item<float>() < 1.0F);
  CHECK(first.mean().item<float>() == Approx(0.5).margin(0.05));
  CHECK(at::equal(first, metric->score(pairs)));
  pairs.seed = 8;
  CHECK_FALSE(at::equal(first, metric->score(pairs)));
}

TEST_CASE("The random metric scores a pair by its id, wherever it stands in the batch",
          "[policies]") {
  // What a process scores under the scalable plan: a part of the pairs, the same ids.
  PairBatch all = pair_batch({6, 6}, {6, 6});
  PairBatch part = pair_batch({3, 2}, {3, 2});
  part.pair_ids = at::tensor({7L, 1L, 9L, 0L, 11L});
  const auto metric = load<lrmoe::MetricPolicy>("random");
  const at::Tensor every = metric->score(all);
  CHECK(at::equal(metric->score(part), every.index_select(0, part.pair_ids)));
  // Neighbouring ids draw unrelated scores: no two of the twelve alike.
  const std::vector<float> scores = to_floats(every);
  CHECK(std::set<float>(scores.begin(), scores.end()).size() == 12);
}
