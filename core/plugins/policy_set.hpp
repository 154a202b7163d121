#pragma once
// The four policies an experiment trains with, created from plugins, and what a run records
// about each.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/config/policies_config.hpp"
#include "core/plugins/plugin_catalog.hpp"

namespace lrmoe {

struct PluginRecord {
  std::string kind;  // "placement", ...
  std::string name;
  std::string version;
  std::string parameters;  // every parameter with its value, as TOML: "capacity_factor = 1.0\n"
  std::string path;
  std::string sha256;
  // Where the policy reads its tensors (its descriptor's `inputs`); the pipeline copies them to
  // the host for a Host policy. Not stored: it is a property of the plugin version.
  TensorPlace inputs = TensorPlace::Device;

  // "the metric plugin 'gate' (/path/gate.so)", for errors about it; kept, so that a plugin call
  // can be marked with it for the crash reports (Note [Plugin failures]).
  std::string label;
};

struct PolicySet {
  std::shared_ptr<PlacementPolicy> placement;
  std::shared_ptr<MetricPolicy> metric;
  std::shared_ptr<SelectionPolicy> selection;
  std::shared_ptr<RoutingPolicy> routing;
  // The same policies where they also implement the optional interfaces the scalable plan needs
  // (lrmoe/routing.hpp, lrmoe/selection.hpp); null where they do not.
  std::shared_ptr<CountRoutingPolicy> count_routing;
  std::shared_ptr<RankedSelectionPolicy> ranked_selection;
  std::vector<PluginRecord> records;  // in PolicyKind order: placement, metric, selection, routing
};

// Where plugins are searched, in order: the runner's own plugin folder (when it has one),
// the folders of LRMOE_PLUGIN_PATH, then those of [policies] plugin_path. Both lists are
// ':'-separated.
std::vector<std::filesystem::path> plugin_folders(const PoliciesConfig& policies);

// The runner's own folder: "plugins" beside the executable (a build tree), or
// "../lib/lrmoe/plugins" from it (an installation); empty when neither exists.
std::filesystem::path runner_plugin_folder();

// Creates the experiment's four policies with their checked parameters; a name no plugin has,
// a bad parameter, or a routing or selection the experiment's planning cannot run is a
// PluginError.
PolicySet create_policy_set(const PoliciesConfig& policies, const PluginCatalog& catalog);

// Discovers the plugins in plugin_folders(policies), then create_policy_set.
PolicySet load_policy_set(const PoliciesConfig& policies);

// Whether `plugin` can serve policies.planning = "scalable": a routing must implement
// lrmoe::CountRoutingPolicy and a selection lrmoe::RankedSelectionPolicy (Note [Scalable
// planning]); placements and metrics always can. Found the way a run finds it, on an object
// created with the plugin's default parameters; a PluginError if none can be created.
bool plans_scalably(const PluginInfo& plugin);

// The optional interface a policy of `kind` implements to serve the scalable plan
// ("CountRoutingPolicy", "RankedSelectionPolicy"); nullptr for kinds that need none.
const char* scalable_interface(PolicyKind kind);

// "fixed_ownership/gate/keep_all/owner": the four names, as runs are listed.
std::string policy_names(const PoliciesConfig& policies);

}  // namespace lrmoe
