#pragma once
// Writing a policy plugin: one shared library, one policy.
//
//   #include <lrmoe/plugin.hpp>
//
//   class MyMetric : public lrmoe::MetricPolicy {
//    public:
//     explicit MyMetric(const lrmoe::Parameters& p) : power_(p.real("power")) {}
//     at::Tensor score(const lrmoe::PairBatch& pairs) override { return pairs.gates.pow(power_); }
//    private:
//     double power_;
//   };
//
//   lrmoe::PluginDescriptor describe() {
//     return lrmoe::describe_policy<MyMetric>("gate_power", "1.0.0", "gate ** power",
//                                             {lrmoe::real_parameter("power", 2.0, "exponent",
//                                             0)});
//   }
//   LRMOE_PLUGIN(describe)
//
// and in CMake: find_package(lrmoe) then lrmoe_add_plugin(my_metric my_metric.cpp).
//
// The loader first reads the plain PluginAbi (plugin-API and LibTorch versions) and refuses a
// mismatch before it calls anything else in the library; the library stays loaded while any
// policy it created lives (Note [Plugin ABI] in docs/notes.md; the guide is docs/PLUGINS.md).

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/dll/alias.hpp>

#include "lrmoe/counter_random.hpp"
#include "lrmoe/expert_segments.hpp"
#include "lrmoe/metric.hpp"
#include "lrmoe/parameters.hpp"
#include "lrmoe/placement.hpp"
#include "lrmoe/routing.hpp"
#include "lrmoe/selection.hpp"
#include "lrmoe/static_owners.hpp"
#include "lrmoe/version.hpp"

namespace lrmoe {

enum class PolicyKind { Placement, Metric, Selection, Routing };

// Where a metric, selection or routing policy reads the tensors it is given (placement sees
// only host data). Device: as they are, on the run's device, so the plan does not wait for it.
// Host: the pipeline hands the policy CPU copies, one device-to-host copy per call (the host
// waits for the device there), and moves what it returns to the device: for policies that loop
// over pairs in C++. Note [Host synchronisation] in docs/notes.md.
enum class TensorPlace { Device, Host };

struct PluginDescriptor {
  PolicyKind kind = PolicyKind::Placement;
  std::string name;         // unique among the plugins the runner finds
  std::string version;      // semantic version of the plugin, "1.2.0"
  std::string description;  // one line
  std::vector<ParameterSpec> parameters;
  // Creates the policy with every declared parameter present and checked. The object must
  // derive from the interface of `kind`; describe_policy guarantees it.
  std::function<std::unique_ptr<Policy>(const Parameters&)> create;
  TensorPlace inputs = TensorPlace::Device;
};

template <typename T>
constexpr PolicyKind policy_kind_of() {
  if constexpr (std::is_base_of_v<PlacementPolicy, T>) {
    return PolicyKind::Placement;
  } else if constexpr (std::is_base_of_v<MetricPolicy, T>) {
    return PolicyKind::Metric;
  } else if constexpr (std::is_base_of_v<SelectionPolicy, T>) {
    return PolicyKind::Selection;
  } else {
    static_assert(
        std::is_base_of_v<RoutingPolicy, T>,
        "a policy derives from PlacementPolicy, MetricPolicy, SelectionPolicy or RoutingPolicy");
    return PolicyKind::Routing;
  }
}

// The descriptor of policy class T, constructed as T(const Parameters&), reading its tensors
// where `inputs` says.
template <typename T>
PluginDescriptor describe_policy(std::string name, std::string version, std::string description,
                                 std::vector<ParameterSpec> parameters = {},
                                 TensorPlace inputs = TensorPlace::Device) {
  return {policy_kind_of<T>(),
          std::move(name),
          std::move(version),
          std::move(description),
          std::move(parameters),
          [](const Parameters& values) -> std::unique_ptr<Policy> {
            return std::make_unique<T>(values);
          },
          inputs};
}

// Entry points the loader looks up by these names.
inline constexpr const char* kAbiEntryPoint = "lrmoe_plugin_abi";
inline constexpr const char* kDescriptorEntryPoint = "lrmoe_plugin_descriptor";
using AbiFunction = PluginAbi();
using DescriptorFunction = PluginDescriptor();

namespace plugin_entry {
inline PluginAbi compiled_abi() {
  return kCompiledAbi;
}
}  // namespace plugin_entry

}  // namespace lrmoe

// Exports `describe_function` (a PluginDescriptor() function) and the ABI this library was
// built with. Use once per plugin library, at namespace scope.
#define LRMOE_PLUGIN(describe_function)                                \
  BOOST_DLL_ALIAS(lrmoe::plugin_entry::compiled_abi, lrmoe_plugin_abi) \
  BOOST_DLL_ALIAS(describe_function, lrmoe_plugin_descriptor)
