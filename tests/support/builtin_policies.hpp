#pragma once
// The built-in policy plugins, loaded from the build's plugin folder as the runner loads them,
// and the small conversions their tests share: tensors to vectors, and backward-phase pair
// batches built by hand.

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/plugins/plugin_catalog.hpp"
#include "core/plugins/policy_parameters.hpp"

namespace lrmoe_test {

inline const lrmoe::PluginCatalog& builtin_catalog() {
  static const lrmoe::PluginCatalog catalog =
      lrmoe::PluginCatalog::discover({LRMOE_BUILTIN_PLUGIN_DIR});
  return catalog;
}

// The built-in plugin `name` of the kind of interface T, created with `values` for some of its
// parameters (the others take their defaults), as the runner creates it.
template <typename T>
std::shared_ptr<T> load(const std::string& name,
                        const std::map<std::string, lrmoe::ParameterValue>& values = {}) {
  const lrmoe::PluginInfo* info = builtin_catalog().find(lrmoe::policy_kind_of<T>(), name);
  REQUIRE(info != nullptr);
  std::map<std::string, lrmoe::PolicySetting> settings;
  for (const auto& [key, value] : values) {
    settings[key] = lrmoe::PolicySetting{value, "tests/support/builtin_policies.hpp"};
  }
  return std::static_pointer_cast<T>(
      lrmoe::create_policy(*info, lrmoe::resolve_parameters(*info, settings)));
}

inline std::vector<int64_t> to_vector(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.to(at::kCPU, at::kLong).contiguous();
  return {cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel()};
}

inline std::vector<float> to_floats(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.to(at::kCPU, at::kFloat).contiguous();
  return {cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel()};
}

inline int64_t sum(const std::vector<int64_t>& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

// Pairs sorted by expert, `pairs_per_expert[e]` of expert e, with the given quotas and unit
// signals; tests set the signals they need.
inline lrmoe::PairBatch pair_batch(const std::vector<int64_t>& pairs_per_expert,
                                   std::vector<int64_t> quota) {
  lrmoe::PairBatch pairs;
  pairs.step = 1;
  pairs.seed = 7;
  pairs.expert_offsets = {0};
  std::vector<int64_t> experts;
  for (size_t e = 0; e < pairs_per_expert.size(); ++e) {
    experts.insert(experts.end(), static_cast<size_t>(pairs_per_expert[e]),
                   static_cast<int64_t>(e));
    pairs.expert_offsets.push_back(static_cast<int64_t>(experts.size()));
  }
  const auto count = static_cast<int64_t>(experts.size());
  pairs.experts = at::tensor(experts, at::kLong);
  pairs.pair_ids = at::arange(count, at::kLong);
  pairs.gates = at::ones({count});
  pairs.upstream_norm = at::ones({count});
  pairs.input_norm = at::ones({count});
  pairs.quota = std::move(quota);
  return pairs;
}

}  // namespace lrmoe_test
