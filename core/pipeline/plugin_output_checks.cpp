#include "core/pipeline/plugin_output_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lrmoe/placement.hpp"

namespace lrmoe {

namespace {

// What each answer must be, said after what was wrong with it: the plugin's author reads the fix
// in the same line (the interfaces' headers say it at length).
constexpr const char* kRoute =
    "route must return [pairs] int64 instance indices, each pair to an instance of its own expert "
    "(RoutingRequest::expert_instances, lrmoe/routing.hpp)";
constexpr const char* kRouteCounts =
    "route_counts must return [ranks x instances] counts >= 0 that send all of each home rank's "
    "pairs of an expert to that expert's instances (lrmoe/routing.hpp)";
constexpr const char* kKeptCount =
    "kept_count(pairs, quota) must return a count from 0 to min(pairs, quota) "
    "(lrmoe/selection.hpp)";
constexpr const char* kKeptWeight =
    "kept_weight must return a finite weight above 0 (lrmoe/selection.hpp)";
constexpr const char* kScore =
    "score must return [pairs] scores, finite and >= 0 (lrmoe/metric.hpp)";
constexpr const char* kSelect =
    "select must return `kept` as strictly increasing int64 indices into the pairs, no more of "
    "an expert's than its quota, and `weights` either undefined or one finite weight >= 0 per "
    "kept pair (lrmoe/selection.hpp)";

// "<what was wrong>: <what it must return>".
PlanError answer_error(const std::string& what, const char* contract) {
  return PlanError(fmt::format("{}: {}", what, contract));
}

// The verdicts of several checks computed on the device, read in one copy.
std::vector<bool> verdicts(const std::vector<torch::Tensor>& checks) {
  const torch::Tensor all = torch::stack(checks).to(torch::kCPU);
  std::vector<bool> out;
  for (int64_t i = 0; i < all.numel(); ++i) out.push_back(all[i].item<bool>());
  return out;
}

// One pass over the scores on the way that succeeds. On the host a loop, where LibTorch's
// reductions and comparisons cost more in dispatch than in reading a layer's scores; on a device
// the least and the greatest score, in [0, inf) exactly when every score is (a NaN makes both
// NaN, which fails), read in one copy.
bool every_score_finite_and_non_negative(const torch::Tensor& scores) {
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  if (scores.device().is_cpu() && scores.scalar_type() == torch::kFloat32) {
    const torch::Tensor values = scores.contiguous();
    const float* score = values.data_ptr<float>();
    bool good = true;
    // Without an early exit, so the loop vectorises; NaN fails both comparisons.
    for (int64_t i = 0; i < values.numel(); ++i) good &= score[i] >= 0.0F && score[i] < kInfinity;
    return good;
  }
  const auto [least, greatest] = torch::aminmax(scores);
  return verdicts({least.ge(0).logical_and(greatest.lt(std::numeric_limits<double>::infinity()))})
      .front();
}

}  // namespace

torch::Tensor checked_routing(const torch::Tensor& instance, const torch::Tensor& experts,
                              const InstanceTable& table, const std::string& policy) {
  if (!instance.defined() || instance.dim() != 1 || instance.numel() != experts.numel()) {
    throw answer_error(
        fmt::format("routing '{}' returned {} for {} pairs", policy,
                    instance.defined() ? c10::str(instance.sizes()) : "nothing", experts.numel()),
        kRoute);
  }
  torch::Tensor routed = instance.to(experts.device(), torch::kInt64).contiguous();
  if (routed.numel() == 0) return routed;
  const torch::Tensor in_range = routed.ge(0).logical_and(routed.lt(table.size()));
  // Clamped, so that an index out of range cannot fault the device before it is reported.
  const torch::Tensor own_expert =
      table.instance_expert.index_select(0, routed.clamp(0, table.size() - 1)).eq(experts);
  const std::vector<bool> ok = verdicts({in_range.all(), own_expert.all()});
  if (!ok[0]) {
    throw answer_error(fmt::format("routing '{}' returned an instance index outside 0..{}", policy,
                                   table.size() - 1),
                       kRoute);
  }
  if (!ok[1]) {
    throw answer_error(
        fmt::format("routing '{}' sent a pair to an instance of another expert", policy), kRoute);
  }
  return routed;
}

void check_count_routing(const std::vector<int64_t>& routed, const std::vector<int64_t>& pairs,
                         int64_t ranks, const InstanceTable& table, const std::string& policy) {
  const int64_t I = table.size();
  const int64_t E = table.num_experts();
  if (static_cast<int64_t>(routed.size()) != ranks * I) {
    throw answer_error(fmt::format("routing '{}' returned {} counts for {} ranks x {} instances",
                                   policy, routed.size(), ranks, I),
                       kRouteCounts);
  }
  // Each home rank's row is read through the experts' instance lists: every instance is in one
  // list, so every count is read once, and no per-expert sums are scattered and cleared.
  for (int64_t h = 0; h < ranks; ++h) {
    const int64_t* row = routed.data() + h * I;
    for (int64_t e = 0; e < E; ++e) {
      int64_t sent = 0;
      for (const int64_t i : table.instances_of(e)) {
        if (row[i] < 0) {
          throw answer_error(
              fmt::format("routing '{}' routed {} pairs of home rank {} to instance {}", policy,
                          row[i], h, i),
              kRouteCounts);
        }
        sent += row[i];
      }
      const int64_t group = pairs[static_cast<std::size_t>(h * E + e)];
      if (sent != group) {
        throw answer_error(fmt::format("routing '{}' routed {} pairs of home rank {} and expert "
                                       "{} to that expert's instances, which has {}",
                                       policy, sent, h, e, group),
                           kRouteCounts);
      }
    }
  }
}

void check_kept_count(int64_t kept, int64_t pairs, int64_t quota, int64_t expert, bool values,
                      const std::string& policy) {
  if (kept < 0 || kept > pairs) {
    throw answer_error(
        fmt::format("selection '{}' keeps {} of expert {}'s {} pairs", policy, kept, expert, pairs),
        kKeptCount);
  }
  if (values && kept > std::max<int64_t>(quota, 0)) {
    throw answer_error(fmt::format("selection '{}' keeps {} pairs of expert {}, above its quota {}",
                                   policy, kept, expert, quota),
                       kKeptCount);
  }
}

void check_kept_weight(float weight, int64_t expert, const std::string& policy) {
  if (!std::isfinite(weight) || weight <= 0) {
    throw answer_error(
        fmt::format("selection '{}' weighs expert {}'s kept pairs {}", policy, expert, weight),
        kKeptWeight);
  }
}

void check_scores(const torch::Tensor& scores, int64_t pairs, bool values,
                  const std::string& policy, const std::vector<NamedInput>& inputs) {
  if (!scores.defined() || scores.numel() != pairs) {
    throw answer_error(
        fmt::format("metric '{}' returned {} for {} pairs", policy,
                    scores.defined() ? std::to_string(scores.numel()) + " scores" : "nothing",
                    pairs),
        kScore);
  }
  // A meta tensor has a shape and no values: nothing can be read from it.
  if (scores.is_meta())
    throw answer_error(fmt::format("metric '{}' returned scores on the meta device, which hold "
                                   "no values",
                                   policy),
                       kScore);
  if (!values || pairs == 0) return;
  if (every_score_finite_and_non_negative(scores.detach())) return;
  const std::vector<bool> ok = verdicts({scores.isfinite().all(), scores.ge(0).all()});
  if (!ok[0]) {
    // Only on this failure path: are the inputs themselves already non-finite?
    for (const NamedInput& input : inputs) {
      if (!input.values.defined() || input.values.numel() == 0) continue;
      const torch::Tensor bad = input.values.isfinite().logical_not().nonzero().flatten().cpu();
      if (bad.numel() == 0) continue;
      const double first =
          input.values.flatten().index({bad[0].item<int64_t>()}).to(torch::kDouble).item<double>();
      throw PlanError(fmt::format(
          "the pairs' {} are NaN or infinite ({} of {}, the first {}): training diverged; lower "
          "train.lr, raise train.warmup_steps or set train.grad_clip",
          input.name, bad.numel(), input.values.numel(), first));
    }
    throw answer_error(fmt::format("metric '{}' returned a NaN or infinite score", policy), kScore);
  }
  if (!ok[1])
    throw answer_error(fmt::format("metric '{}' returned a negative score", policy), kScore);
}

void check_selection(const Selection& selection, const torch::Tensor& experts,
                     const std::vector<int64_t>& quota, bool values, const std::string& policy) {
  const torch::Tensor& kept = selection.kept;
  const int64_t pairs = experts.numel();
  auto fail = [&](const std::string& why) {
    return answer_error(fmt::format("selection '{}' {}", policy, why), kSelect);
  };
  if (!kept.defined() || kept.dim() != 1 || kept.scalar_type() != torch::kInt64) {
    throw fail("returned `kept` that is not a 1-D int64 tensor");
  }
  const torch::Tensor& weights = selection.weights;
  if (kept.is_meta() || (weights.defined() && weights.is_meta()))
    throw fail("returned tensors on the meta device, which hold no values");
  if (weights.defined() && weights.numel() != kept.numel()) {
    throw fail(fmt::format("returned {} weights for {} kept pairs", weights.numel(), kept.numel()));
  }
  if (kept.numel() == 0) return;
  if (pairs == 0) throw fail("kept a pair index out of range");  // there are none to keep
  const torch::Tensor on_device = kept.to(experts.device());
  std::vector<torch::Tensor> checks{on_device.ge(0).logical_and(on_device.lt(pairs)).all(),
                                    (on_device.slice(0, 1) > on_device.slice(0, 0, -1)).all()};
  torch::Tensor kept_per_expert, quota_tensor;
  if (values) {
    // Clamped, so that an index out of range is reported before it is used.
    kept_per_expert = torch::bincount(experts.index_select(0, on_device.clamp(0, pairs - 1)), {},
                                      static_cast<int64_t>(quota.size()));
    quota_tensor = torch::tensor(quota, torch::kInt64).to(experts.device());
    checks.push_back(kept_per_expert.le(quota_tensor).all());
    if (weights.defined()) {
      checks.push_back(weights.isfinite().all().to(experts.device()));
      checks.push_back(weights.ge(0).all().to(experts.device()));
    }
  }
  const std::vector<bool> ok = verdicts(checks);
  if (!ok[0]) throw fail("kept a pair index out of range");
  if (!ok[1]) throw fail("returned `kept` not strictly increasing");
  if (!values) return;
  if (!ok[2]) {
    const torch::Tensor over = kept_per_expert.gt(quota_tensor).nonzero().flatten().to(torch::kCPU);
    const int64_t expert = over[0].item<int64_t>();
    throw fail(fmt::format("kept {} pairs of expert {}, above its quota of {}",
                           kept_per_expert[expert].item<int64_t>(), expert,
                           quota[static_cast<std::size_t>(expert)]));
  }
  if (weights.defined() && !ok[3]) throw fail("returned a NaN or infinite weight");
  if (weights.defined() && !ok[4]) throw fail("returned a negative weight");
}

}  // namespace lrmoe
