#include "core/pipeline/plugin_output_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lrmoe/placement.hpp"

namespace lrmoe {

namespace {

// The verdicts of several checks computed on the device, read in one copy.
std::vector<bool> verdicts(const std::vector<torch::Tensor>& checks) {
  const torch::Tensor all = torch::stack(checks).to(torch::kCPU);
  std::vector<bool> out;
  for (int64_t i = 0; i < all.numel(); ++i) out.push_back(all[i].item<bool>());
  return out;
}

}  // namespace

torch::Tensor checked_routing(const torch::Tensor& instance, const torch::Tensor& experts,
                              const InstanceTable& table, const std::string& policy) {
  if (!instance.defined() || instance.dim() != 1 || instance.numel() != experts.numel()) {
    throw PlanError(fmt::format("routing '{}' must return one instance per pair ({})", policy,
                                experts.numel()));
  }
  torch::Tensor routed = instance.to(experts.device(), torch::kInt64).contiguous();
  if (routed.numel() == 0) return routed;
  const torch::Tensor in_range = routed.ge(0).logical_and(routed.lt(table.size()));
  // Clamped, so that an index out of range cannot fault the device before it is reported.
  const torch::Tensor own_expert =
      table.instance_expert.index_select(0, routed.clamp(0, table.size() - 1)).eq(experts);
  const std::vector<bool> ok = verdicts({in_range.all(), own_expert.all()});
  if (!ok[0]) {
    throw PlanError(fmt::format("routing '{}' returned an instance index outside 0..{}", policy,
                                table.size() - 1));
  }
  if (!ok[1]) {
    throw PlanError(
        fmt::format("routing '{}' sent a pair to an instance of another expert", policy));
  }
  return routed;
}

void check_count_routing(const std::vector<int64_t>& routed, const std::vector<int64_t>& pairs,
                         int64_t ranks, const InstanceTable& table, const std::string& policy) {
  const int64_t I = table.size();
  const auto E = static_cast<int64_t>(table.expert_instances.size());
  if (static_cast<int64_t>(routed.size()) != ranks * I) {
    throw PlanError(fmt::format(
        "routing '{}' must return one count per (home rank, instance) ({} x {}), returned {}",
        policy, ranks, I, routed.size()));
  }
  for (int64_t h = 0; h < ranks; ++h) {
    std::vector<int64_t> sent(static_cast<std::size_t>(E), 0);
    for (int64_t i = 0; i < I; ++i) {
      const int64_t count = routed[static_cast<std::size_t>(h * I + i)];
      if (count < 0) {
        throw PlanError(fmt::format("routing '{}' routed {} pairs of home rank {} to instance {}",
                                    policy, count, h, i));
      }
      sent[static_cast<std::size_t>(table.instances[static_cast<std::size_t>(i)].expert)] += count;
    }
    for (int64_t e = 0; e < E; ++e) {
      const int64_t group = pairs[static_cast<std::size_t>(h * E + e)];
      if (sent[static_cast<std::size_t>(e)] != group) {
        throw PlanError(fmt::format(
            "routing '{}' routed {} pairs of home rank {} and expert {} to that expert's "
            "instances, which has {}",
            policy, sent[static_cast<std::size_t>(e)], h, e, group));
      }
    }
  }
}

void check_kept_count(int64_t kept, int64_t pairs, int64_t quota, int64_t expert, bool values,
                      const std::string& policy) {
  if (kept < 0 || kept > pairs) {
    throw PlanError(fmt::format("selection '{}' keeps {} of expert {}'s {} pairs", policy, kept,
                                expert, pairs));
  }
  if (values && kept > std::max<int64_t>(quota, 0)) {
    throw PlanError(fmt::format("selection '{}' keeps {} pairs of expert {}, above its quota {}",
                                policy, kept, expert, quota));
  }
}

void check_kept_weight(float weight, int64_t expert, const std::string& policy) {
  if (!std::isfinite(weight) || weight <= 0) {
    throw PlanError(
        fmt::format("selection '{}' weighs expert {}'s kept pairs {}", policy, expert, weight));
  }
}

void check_scores(const torch::Tensor& scores, int64_t pairs, bool values,
                  const std::string& policy, const std::vector<NamedInput>& inputs) {
  if (!scores.defined() || scores.numel() != pairs) {
    throw PlanError(fmt::format("metric '{}' must return one score per pair ({})", policy, pairs));
  }
  if (!values || pairs == 0) return;
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
    throw PlanError(fmt::format("metric '{}' returned a NaN or infinite score", policy));
  }
  if (!ok[1]) throw PlanError(fmt::format("metric '{}' returned a negative score", policy));
}

void check_selection(const Selection& selection, const torch::Tensor& experts,
                     const std::vector<int64_t>& quota, bool values, const std::string& policy) {
  const torch::Tensor& kept = selection.kept;
  const int64_t pairs = experts.numel();
  auto fail = [&](const std::string& why) {
    return PlanError(fmt::format("selection '{}' {}", policy, why));
  };
  if (!kept.defined() || kept.dim() != 1 || kept.scalar_type() != torch::kInt64) {
    throw fail("must return `kept` as a 1-D int64 tensor");
  }
  const torch::Tensor& weights = selection.weights;
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
  if (!ok[1]) throw fail("must return `kept` strictly increasing");
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
