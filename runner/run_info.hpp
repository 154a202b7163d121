#pragma once
// What the results database records of a run when it begins, from its resolved experiment: one
// place for `lrmoe run` and `lrmoe replay`, so that both kinds of run are described alike and
// `lrmoe compare` reads them alike.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/config/experiment.hpp"
#include "core/cost/hardware_profile.hpp"
#include "core/data/data_provenance.hpp"
#include "core/data/tokenizer_file.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/train/checkpoint.hpp"
#include "store/results_store.hpp"

namespace lrmoe {

// `blas`: the library and its measured speed, as the run logs it; `memory_per_rank`: resolved
// to bytes; `processes`: those hosting the logical ranks.
RunInfo run_info(const Experiment& experiment, const HardwareProfile& profile,
                 int64_t memory_per_rank, const std::string& blas, int64_t processes);

// The experiment with what every run of it may differ in (threads, database) left out, hashed:
// whether a recorded sweep cell is this experiment.
std::string experiment_identity(Experiment experiment);
// The name a run's model is recorded under: its preset, "hf:FOLDER" for a config.json (the
// folder holding it, as a Hugging Face repository is named), else "custom".
std::string model_name(const ModelConfig& model);

// What a run's checkpoints must match: its experiment_identity and this build.
CheckpointIdentity checkpoint_identity(const Experiment& experiment);

// Where run `run` of `database` keeps its checkpoints: beside the database, in
// "<database>-checkpoints/run-<run>".
std::filesystem::path checkpoint_folder(const std::string& database, int64_t run);

// The plugins of `policies` as the run_plugins table records them.
std::vector<PluginRecordRow> plugin_rows(const PolicySet& policies);

// What the run trains on as the run_data table records it: with a corpus manifest, its corpus and
// tokenizer; without one, the tokenizer the run names (data.tokenizer), if any.
RunDataRow data_row(const DataProvenance& data,
                    const std::optional<TokenizerFile>& tokenizer = std::nullopt);

}  // namespace lrmoe
