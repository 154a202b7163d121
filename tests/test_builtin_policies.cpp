// The built-in policy plugins as a set: each loads from the build's plugin folder with its name,
// kind and version, and parameters outside their declared range are refused. Each kind's rules
// are tested in test_placement_policies.cpp, test_metric_policies.cpp,
// test_selection_policies.cpp and test_routing_policies.cpp.

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/plugins/policy_set.hpp"
#include "support/builtin_policies.hpp"

using lrmoe_test::builtin_catalog;
using lrmoe_test::load;

TEST_CASE("Every built-in policy plugin loads with its name, kind and version", "[policies]") {
  const std::vector<std::pair<lrmoe::PolicyKind, std::vector<std::string>>> expected = {
      {lrmoe::PolicyKind::Placement, {"fixed_ownership", "symi", "lrmoe"}},
      {lrmoe::PolicyKind::Metric, {"gate", "gate_grad_norm", "grad_contribution", "random"}},
      {lrmoe::PolicyKind::Selection,
       {"keep_all", "quota_topk", "threshold", "importance_sampling"}},
      {lrmoe::PolicyKind::Routing, {"owner", "round_robin", "capacity_aware"}}};
  for (const auto& [kind, names] : expected) {
    for (const std::string& name : names) {
      INFO(name);
      const lrmoe::PluginInfo* info = builtin_catalog().find(kind, name);
      REQUIRE(info != nullptr);
      // lrmoe 3: the replicas the forward needs to fit; importance_sampling 2: a fixed count
      // (systematic sampling); symi 1.1: fit_budget; capacity_aware 2: exact transport;
      // capacity_aware 2.1, owner, round_robin, quota_topk and keep_all 1.1: count routing and
      // ranked selection, for the scalable plan; random 2: draws keyed by pair id;
      // fixed_ownership 1.1: a capacity in pairs; symi 2, fixed_ownership 1.2: the slots that fit,
      // layouts and copies (Note [SYMI as published]) and the information a plan used; symi
      // 2.0.1, fixed_ownership 1.2.1: capacity_factor at most lrmoe::kMostCapacityFactor;
      // fixed_ownership 1.3: drop, the rule for the pairs past the capacity; symi 3: drop, random
      // by default (DeepSpeed's random token selection), lowest gates a variant; lrmoe 4.1: the
      // forward fallback (4.1.1: replicas that do not fit at all taken back before the cap); lrmoe
      // 4.2: quota_by, the quotas spread by score mass.
      const std::map<std::string, std::string> changed = {
          {"lrmoe", "4.2.0"},          {"importance_sampling", "2.0.0"},
          {"capacity_aware", "2.1.0"}, {"symi", "3.0.0"},
          {"owner", "1.1.0"},          {"round_robin", "1.1.0"},
          {"quota_topk", "1.1.0"},     {"keep_all", "1.1.0"},
          {"random", "2.0.0"},         {"fixed_ownership", "1.3.0"}};
      const std::string version = changed.count(name) ? changed.at(name) : "1.0.0";
      CHECK(info->descriptor.version == version);
      CHECK(info->path.stem() == name);
      CHECK(lrmoe::create_policy(*info, lrmoe::resolve_parameters(*info, {})) != nullptr);
    }
  }
}

TEST_CASE("The built-in routings and selections that can plan scalably say so, the others do not",
          "[policies]") {
  const std::vector<std::pair<lrmoe::PolicyKind, std::map<std::string, bool>>> expected = {
      {lrmoe::PolicyKind::Selection,
       {{"keep_all", true},
        {"quota_topk", true},
        {"threshold", false},
        {"importance_sampling", false}}},
      {lrmoe::PolicyKind::Routing,
       {{"owner", true}, {"round_robin", true}, {"capacity_aware", true}}},
      {lrmoe::PolicyKind::Placement, {{"symi", true}}},
      {lrmoe::PolicyKind::Metric, {{"random", true}}}};
  for (const auto& [kind, names] : expected) {
    for (const auto& [name, scalable] : names) {
      INFO(name);
      const lrmoe::PluginInfo* info = builtin_catalog().find(kind, name);
      REQUIRE(info != nullptr);
      CHECK(lrmoe::plans_scalably(*info) == scalable);
    }
  }
}

TEST_CASE("Policy parameters outside their declared range are refused", "[policies]") {
  CHECK_THROWS_AS(load<lrmoe::SelectionPolicy>("threshold", {{"threshold", 1.5}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::SelectionPolicy>("importance_sampling", {{"uniform_mix", -0.1}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::PlacementPolicy>("lrmoe", {{"keep_fraction", 1.2}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::PlacementPolicy>("lrmoe", {{"max_replicas", int64_t{-1}}}),
                  lrmoe::PluginError);
  CHECK_THROWS_AS(load<lrmoe::PlacementPolicy>("symi", {{"capacity_factor", -1.0}}),
                  lrmoe::PluginError);
}
