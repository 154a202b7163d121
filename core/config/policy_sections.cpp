#include "core/config/policy_sections.hpp"

#include <fmt/format.h>

#include <array>

#include "core/config/config_error.hpp"
#include "core/config/exact_number.hpp"
#include "core/config/field_value.hpp"

namespace lrmoe {
namespace {

// The four plugins of each bundle: the LRMoE system and its two baselines, fixed expert ownership
// and SYMI (docs/ARCHITECTURE.md).
struct Bundle {
  const char* name;
  std::array<const char*, 4> plugins;  // placement, metric, selection, routing
  OptimizerState optimizer_state;      // where the experts' optimizer state lives
};
constexpr std::array<Bundle, 3> kBundles{{
    // Expert parallelism as in DeepSpeed-MoE / Megatron: static owners, exact backward.
    {"fixed", {"fixed_ownership", "gate", "keep_all", "owner"}, OptimizerState::Device},
    // Replicas follow the previous step's popularity; tokens split evenly over replicas; the
    // optimizer state in host memory (Note [SYMI as published]).
    {"symi", {"symi", "gate", "keep_all", "round_robin"}, OptimizerState::Host},
    // Quotas and replicas planned together; contribution-ranked backward over replicas.
    {"lrmoe",
     {"lrmoe", "grad_contribution", "quota_topk", "capacity_aware"},
     OptimizerState::Device},
}};

}  // namespace

const std::map<std::string, PolicySetting>& PolicyChoice::chosen_parameters() const {
  static const std::map<std::string, PolicySetting> none;
  const auto it = settings.find(name);
  return it == settings.end() ? none : it->second.parameters;
}

const std::vector<PolicySection>& policy_sections() {
  static const std::vector<PolicySection> sections{
      {"policies.placement", "placement", &PoliciesConfig::placement},
      {"policies.metric", "metric", &PoliciesConfig::metric},
      {"policies.selection", "selection", &PoliciesConfig::selection},
      {"policies.routing", "routing", &PoliciesConfig::routing},
  };
  return sections;
}

const PolicySection* find_policy_section(std::string_view section) {
  for (const PolicySection& policy : policy_sections()) {
    if (policy.section == section) return &policy;
  }
  return nullptr;
}

ParameterValue setting_value(const toml::node& node, const std::string& place) {
  if (const auto* v = node.as_integer()) return v->get();
  if (const auto* v = node.as_floating_point()) {
    if (const std::string problem = non_finite_problem(v->get()); !problem.empty())
      throw ConfigError(fmt::format("{}: a plugin parameter {}", place, problem));
    return v->get();
  }
  if (const auto* v = node.as_boolean()) return v->get();
  if (const auto* v = node.as_string()) {
    if (v->get().find('\0') != std::string::npos)
      throw ConfigError(place + ": a plugin parameter must not contain a NUL character");
    return v->get();
  }
  throw ConfigError(fmt::format(
      "{}: a plugin parameter must be an integer, a number, true/false or a string, got {}", place,
      toml_type_name(node)));
}

std::string setting_toml(const ParameterValue& value) {
  return std::visit([](const auto& v) { return field_value_toml(FieldValue{v}); }, value);
}

std::vector<std::string> bundle_names() {
  std::vector<std::string> names;
  for (const Bundle& bundle : kBundles) names.emplace_back(bundle.name);
  return names;
}

void apply_bundle(PoliciesConfig& policies) {
  const Bundle& bundle = kBundles.at(static_cast<std::size_t>(policies.bundle));
  for (std::size_t i = 0; i < policy_sections().size(); ++i) {
    PolicyChoice& choice = policies.*(policy_sections()[i].choice);
    if (choice.name.empty()) choice.name = bundle.plugins[i];
  }
  if (policies.optimizer_state == OptimizerState::Bundle)
    policies.optimizer_state = bundle.optimizer_state;
}

}  // namespace lrmoe
