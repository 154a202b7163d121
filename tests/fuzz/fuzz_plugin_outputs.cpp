// Fuzz target: what a placement, routing, metric and selection plugin may return, checked by the
// pipeline's validators (core/pipeline/instance_table.cpp, plugin_output_checks.cpp). The input
// is read as a stream of small numbers: a layer's shape, a placement plan, pairs, a routing
// answer, scores and a selection. Every answer must be accepted or refused with a PlanError; an
// accepted one must really hold what the checks promise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/plugin_output_checks.hpp"

namespace {

class ByteStream {
 public:
  ByteStream(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  int64_t small(int64_t bound) { return static_cast<int64_t>(byte()) % bound; }
  // Any int64 now and then, so that indices far out of range are tried.
  int64_t index(int64_t bound) {
    const uint8_t kind = byte();
    if (kind < 240) return static_cast<int64_t>(byte()) % (bound + 2) - 1;
    int64_t value = 0;
    for (int i = 0; i < 8; ++i) value = (value << 8) | byte();
    return value;
  }
  float real() {
    uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits = (bits << 8) | byte();
    float value = 0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteStream in(data, size);
  const int64_t experts = 1 + in.small(8), ranks = 1 + in.small(4), slots = 1 + in.small(4);
  lrmoe::PlacementPlan plan;
  const int64_t instances = in.small(2 * experts + 2);
  for (int64_t i = 0; i < instances; ++i) {
    plan.instances.push_back(
        {in.index(experts), in.index(ranks), in.index(slots), (in.byte() & 1) != 0});
  }
  const int64_t quotas = experts + in.small(3) - 1;
  for (int64_t e = 0; e < quotas; ++e) plan.quota.push_back(in.index(6));

  lrmoe::InstanceTable table;
  try {
    table = lrmoe::build_instance_table(plan, experts, ranks, slots, "fuzz");
    table.place_on(torch::kCPU);
  } catch (const lrmoe::PlanError&) {
    return 0;
  }

  // Pairs in expert order, as the pipeline hands them over.
  const int64_t pairs = in.small(12);
  std::vector<int64_t> pair_experts;
  for (int64_t i = 0; i < pairs; ++i) pair_experts.push_back(in.small(experts));
  std::sort(pair_experts.begin(), pair_experts.end());
  const torch::Tensor experts_tensor = torch::tensor(pair_experts, torch::kInt64);

  std::vector<int64_t> routed;
  const int64_t answers = pairs + (in.byte() < 16 ? 1 : 0);
  for (int64_t i = 0; i < answers; ++i) routed.push_back(in.index(table.size()));
  try {
    const torch::Tensor instance =
        lrmoe::checked_routing(torch::tensor(routed, torch::kInt64), experts_tensor, table, "fuzz");
    for (int64_t i = 0; i < pairs; ++i) {
      const int64_t chosen = instance[i].item<int64_t>();
      if (chosen < 0 || chosen >= table.size() ||
          table.instance_expert[chosen].item<int64_t>() != pair_experts[static_cast<size_t>(i)])
        __builtin_trap();
    }
  } catch (const lrmoe::PlanError&) {
  }

  std::vector<float> scores;
  for (int64_t i = 0; i < pairs; ++i) scores.push_back(in.real());
  try {
    lrmoe::check_scores(torch::tensor(scores), pairs, true, "fuzz", {});
    for (const float s : scores) {
      if (!std::isfinite(s) || s < 0) __builtin_trap();
    }
  } catch (const lrmoe::PlanError&) {
  }

  lrmoe::Selection selection;
  std::vector<int64_t> kept;
  std::vector<float> weights;
  const int64_t count = in.small(pairs + 2);
  for (int64_t i = 0; i < count; ++i) {
    kept.push_back(in.index(pairs));
    weights.push_back(in.real());
  }
  selection.kept = torch::tensor(kept, torch::kInt64);
  if (in.byte() & 1) selection.weights = torch::tensor(weights);
  std::vector<int64_t> quota(static_cast<size_t>(experts));
  for (int64_t& q : quota) q = in.small(4);
  try {
    lrmoe::check_selection(selection, experts_tensor, quota, true, "fuzz");
    std::vector<int64_t> per_expert(static_cast<size_t>(experts), 0);
    for (size_t j = 0; j < kept.size(); ++j) {
      if (kept[j] < 0 || kept[j] >= pairs || (j > 0 && kept[j] <= kept[j - 1])) __builtin_trap();
      const auto e = static_cast<size_t>(pair_experts[static_cast<size_t>(kept[j])]);
      if (++per_expert[e] > quota[e]) __builtin_trap();
      if (selection.weights.defined() && !(std::isfinite(weights[j]) && weights[j] >= 0))
        __builtin_trap();
    }
  } catch (const lrmoe::PlanError&) {
  }
  return 0;
}
