#include "core/pipeline/plugin_output_checks.hpp"

#include <fmt/format.h>

#include "lrmoe/placement.hpp"

namespace lrmoe {

torch::Tensor checked_routing(const torch::Tensor& instance, const torch::Tensor& experts,
                              const InstanceTable& table, const std::string& policy) {
  if (!instance.defined() || instance.dim() != 1 || instance.numel() != experts.numel()) {
    throw PlanError(fmt::format("routing '{}' must return one instance per pair ({})", policy,
                                experts.numel()));
  }
  torch::Tensor cpu = instance.to(torch::kCPU, torch::kInt64).contiguous();
  if (cpu.numel() > 0 &&
      (cpu.min().item<int64_t>() < 0 || cpu.max().item<int64_t>() >= table.size())) {
    throw PlanError(fmt::format("routing '{}' returned an instance index outside 0..{}", policy,
                                table.size() - 1));
  }
  if (!table.instance_expert.index_select(0, cpu).equal(experts)) {
    throw PlanError(
        fmt::format("routing '{}' sent a pair to an instance of another expert", policy));
  }
  return cpu;
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
    if (kept.min().item<int64_t>() < 0 || kept.max().item<int64_t>() >= pairs)
      throw fail("kept a pair index out of range");
    if (kept.numel() > 1 && !(kept.slice(0, 1) > kept.slice(0, 0, -1)).all().item<bool>()) {
      throw fail("must return `kept` strictly increasing");
    }
  }
  if (selection.weights.defined() && selection.weights.numel() != kept.numel()) {
    throw fail(fmt::format("returned {} weights for {} kept pairs", selection.weights.numel(),
                           kept.numel()));
  }
}

}  // namespace lrmoe
