#pragma once
// Policies whose decisions a test writes down as lambdas, so that a test of the pipeline knows
// exactly which instances, scores, kept pairs and routes it asked for.

#include <functional>
#include <memory>

#include "core/plugins/plugin_boundary.hpp"
#include "core/plugins/policy_set.hpp"

namespace lrmoe_test {

struct ScriptedPlacement : lrmoe::PlacementPolicy {
  std::function<lrmoe::PlacementPlan(const lrmoe::PlacementRequest&)> decide;
  lrmoe::PlanInformation declared = lrmoe::PlanInformation::ThisPass;
  lrmoe::PlanInformation plans_from() const override { return declared; }
  lrmoe::PlacementPlan plan(const lrmoe::PlacementRequest& request) override {
    return decide(request);
  }
};

struct ScriptedMetric : lrmoe::MetricPolicy {
  std::function<at::Tensor(const lrmoe::PairBatch&)> decide;
  at::Tensor score(const lrmoe::PairBatch& pairs) override { return decide(pairs); }
};

struct ScriptedSelection : lrmoe::SelectionPolicy {
  std::function<lrmoe::Selection(const lrmoe::PairBatch&, const at::Tensor&)> decide;
  lrmoe::Selection select(const lrmoe::PairBatch& pairs, const at::Tensor& scores) override {
    return decide(pairs, scores);
  }
};

struct ScriptedRouting : lrmoe::RoutingPolicy {
  std::function<at::Tensor(const lrmoe::RoutingRequest&)> decide;
  at::Tensor route(const lrmoe::RoutingRequest& request) override { return decide(request); }
};

// Defaults: the gate as score, every pair kept, every pair to its expert's owner. The
// placement has no default: each test states its plan.
inline std::shared_ptr<lrmoe::PolicySet> scripted_policies(
    std::function<lrmoe::PlacementPlan(const lrmoe::PlacementRequest&)> placement) {
  auto set = std::make_shared<lrmoe::PolicySet>();
  auto p = std::make_shared<ScriptedPlacement>();
  p->decide = std::move(placement);
  auto m = std::make_shared<ScriptedMetric>();
  m->decide = [](const lrmoe::PairBatch& pairs) { return pairs.gates; };
  auto s = std::make_shared<ScriptedSelection>();
  s->decide = [](const lrmoe::PairBatch& pairs, const at::Tensor&) {
    return lrmoe::Selection{torch::arange(pairs.experts.numel(), torch::kInt64), {}};
  };
  auto r = std::make_shared<ScriptedRouting>();
  r->decide = [](const lrmoe::RoutingRequest& request) {
    auto out = torch::empty_like(request.experts);
    for (int64_t i = 0; i < out.numel(); ++i) {
      out[i] = request.expert_instances[request.experts[i].item<int64_t>()].front();
    }
    return out;
  };
  set->placement = p;
  set->metric = m;
  set->selection = s;
  set->routing = r;
  // The routing loops over pairs on the host, as a plugin declaring TensorPlace::Host does.
  for (const char* kind : {"placement", "metric", "selection", "routing"}) {
    const bool host = std::string(kind) == "routing";
    set->records.push_back({kind, std::string("scripted_") + kind, "0", "", "", "",
                            host ? lrmoe::TensorPlace::Host : lrmoe::TensorPlace::Device,
                            lrmoe::plugin_label(kind, std::string("scripted_") + kind, "")});
  }
  return set;
}

inline ScriptedPlacement& placement_of(lrmoe::PolicySet& set) {
  return static_cast<ScriptedPlacement&>(*set.placement);
}
inline ScriptedMetric& metric_of(lrmoe::PolicySet& set) {
  return static_cast<ScriptedMetric&>(*set.metric);
}
inline ScriptedSelection& selection_of(lrmoe::PolicySet& set) {
  return static_cast<ScriptedSelection&>(*set.selection);
}
inline ScriptedRouting& routing_of(lrmoe::PolicySet& set) {
  return static_cast<ScriptedRouting&>(*set.routing);
}

}  // namespace lrmoe_test
