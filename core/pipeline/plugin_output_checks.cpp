#include "core/pipeline/plugin_output_checks.hpp"

#include <fmt/format.h>

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

void check_scores(const torch::Tensor& scores, int64_t pairs, const std::string& policy) {
  if (!scores.defined() || scores.numel() != pairs) {
    throw PlanError(fmt::format("metric '{}' must return one score per pair ({})", policy, pairs));
  }
}

void check_selection(const Selection& selection, int64_t pairs, const std::string& policy) {
  const torch::Tensor& kept = selection.kept;
  auto fail = [&](const std::string& why) {
    return PlanError(fmt::format("selection '{}' {}", policy, why));
  };
  if (!kept.defined() || kept.dim() != 1 || kept.scalar_type() != torch::kInt64) {
    throw fail("must return `kept` as a 1-D int64 tensor");
  }
  if (kept.numel() > 0) {
    const torch::Tensor in_range = kept.ge(0).logical_and(kept.lt(pairs)).all();
    const torch::Tensor increasing = (kept.slice(0, 1) > kept.slice(0, 0, -1)).all();
    const std::vector<bool> ok = verdicts({in_range, increasing});
    if (!ok[0]) throw fail("kept a pair index out of range");
    if (!ok[1]) throw fail("must return `kept` strictly increasing");
  }
  if (selection.weights.defined() && selection.weights.numel() != kept.numel()) {
    throw fail(fmt::format("returned {} weights for {} kept pairs", selection.weights.numel(),
                           kept.numel()));
  }
}

}  // namespace lrmoe
