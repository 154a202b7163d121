#pragma once
// The typed experiment: what an experiment TOML resolves to, one struct per section. Code that
// needs one section includes its header (core/config/<section>_config.hpp), so that a change to
// one section rebuilds only its users. Field meanings, defaults and ranges are documented once,
// in the schema table (core/config/experiment_schema.cpp; `lrmoe schema` prints it).

#include <cstdint>
#include <string>

#include "core/config/cluster_config.hpp"
#include "core/config/data_config.hpp"
#include "core/config/model_config.hpp"
#include "core/config/policies_config.hpp"
#include "core/config/train_config.hpp"

namespace lrmoe {

struct StoreConfig {
  std::string path = "lrmoe.db";
};

struct ExperimentInfo {
  std::string name = "experiment";
  uint64_t seed = 0;
  std::string notes;
};

struct Experiment {
  ExperimentInfo experiment;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  ClusterConfig cluster;
  PoliciesConfig policies;
  StoreConfig store;
};

}  // namespace lrmoe
