#pragma once
// The [policies] section of an experiment: the four policy plugins and their settings. Field
// meanings, defaults and ranges are documented once, in the schema table
// (core/config/experiment_schema.cpp; `lrmoe schema` prints it).

#include <map>
#include <string>

#include "lrmoe/parameters.hpp"

namespace lrmoe {

// A policy plugin's parameter as an experiment sets it, with where it was set (for messages).
struct PolicySetting {
  ParameterValue value;
  std::string place;  // "exp.toml:12:3" or "--set policies.placement.lrmoe.keep_fraction"
};

// The parameters an experiment writes for one plugin, in that plugin's own table
// [policies.<kind>.<plugin>] (Note [Plugin parameters] in docs/notes.md).
struct PluginSettings {
  std::string place;  // where the table was first named, for "no plugin has this name"
  std::map<std::string, PolicySetting> parameters;
};

struct PolicyChoice {
  std::string name;  // plugin name; resolved from the bundle when the experiment names none
  // By plugin name. Every table is checked against its plugin; only `name`'s is used, so that
  // a parameter written for one plugin never makes another choice unusable.
  std::map<std::string, PluginSettings> settings;

  // The chosen plugin's parameters (none when the experiment writes no table for it).
  const std::map<std::string, PolicySetting>& chosen_parameters() const;
};

// What a pair whose backward work is not kept still gets: nothing through its expert (neither
// weight nor input gradient), or its exact input gradient (only its weight-gradient
// contribution is dropped). Note [Gradients of dropped pairs] in docs/notes.md.
enum class DroppedPairKeeps { Nothing, InputGrad };

// How the processes of a run agree on each pass's plan: every process gathers every pair and
// plans over all of them, or each plans from summed counts and per-expert score thresholds
// (Note [Exact multi-process plan], Note [Scalable planning] in docs/notes.md).
enum class Planning { Exact, Scalable };

// Named sets of the four policies (core/config/policy_sections.cpp lists what each picks).
enum class PolicyBundle { Fixed, Symi, Lrmoe };

// Where the routed experts' optimizer state (AdamW's two moments) lives: in device memory, on
// each expert's home rank, as expert parallelism keeps it; or in host memory, out of the device
// budget, as SYMI keeps it, its gradients going down to the host and its updated weights coming
// up every step (Note [Optimizer state in host memory]). Bundle: the bundle's (host for symi,
// device for the others), resolved when the experiment is loaded.
enum class OptimizerState { Bundle, Device, Host };

struct PoliciesConfig {
  PolicyBundle bundle = PolicyBundle::Fixed;
  std::string plugin_path;  // extra plugin folders, ':'-separated
  bool recompute = false;   // recompute kept pairs' expert activations in backward
  DroppedPairKeeps dropped_pair_keeps = DroppedPairKeeps::Nothing;
  // Check the values plugins return (scores, weights, quotas), not only their shapes.
  bool check_plugin_outputs = true;
  Planning planning = Planning::Exact;
  // Seconds one call into a plugin may take before the run fails as hung (Note [Plugin
  // failures] in docs/notes.md).
  double call_timeout = 600;
  OptimizerState optimizer_state = OptimizerState::Bundle;
  PolicyChoice placement;
  PolicyChoice metric;
  PolicyChoice selection;
  PolicyChoice routing;
};

}  // namespace lrmoe
