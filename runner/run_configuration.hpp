#pragma once
// What a run computed, as settings, for grouping runs into variants (lrmoe compare): every key
// of its resolved experiment that can change a figure, flattened ("cluster.memory_per_rank"),
// its plugins' parameters as "policies.KIND.PLUGIN.PARAMETER" (the resolved experiment has only
// those given; a plugin's defaults are recorded with the run) and its sweep cell's settings.
// Keys that name, place or pace the recording (the experiment's name, notes and seed, the
// database, threads, checkpoints, logging, the rendezvous, the plugin folder and output checks)
// are left out: runs that differ only in them are seeds of one configuration.

#include <map>
#include <string>

#include "store/results_store.hpp"

namespace lrmoe {

struct RunConfiguration {
  std::map<std::string, std::string> model;     // model.*
  std::map<std::string, std::string> settings;  // the rest
};

RunConfiguration run_configuration(const RunFigures& run);

}  // namespace lrmoe
