#include "runner/run_info.hpp"

#include <unistd.h>

#include "core/config/experiment_loader.hpp"
#include "core/config/hf_model_config.hpp"
#include "core/config/parameter_count.hpp"
#include "core/system/host_info.hpp"
#include "core/system/libtorch_compat.hpp"
#include "core/system/sha256.hpp"

namespace lrmoe {

RunInfo run_info(const Experiment& experiment, const HardwareProfile& profile,
                 int64_t memory_per_rank, const std::string& blas, int64_t processes) {
  RunInfo info;
  info.name = experiment.experiment.name;
  info.model = model_name(experiment.model);
  info.resolved_toml = to_toml(experiment);
  info.toml_sha256 = sha256_hex(info.resolved_toml);
  info.code_version = code_version();
  info.host = host_name();
  info.pid = getpid();
  info.torch_version = torch_version();
  info.blas = blas;
  info.seed = experiment.experiment.seed;
  const ParameterCount params = count_parameters(experiment.model);
  info.params_total = params.total;
  info.params_active = params.active;
  if (experiment.train.target_loss > 0) info.target_loss = experiment.train.target_loss;
  info.ranks = experiment.cluster.ranks;
  info.processes = processes;
  info.policies = policy_names(experiment.policies);
  info.hardware_profile = profile.to_toml();
  info.memory_per_rank = memory_per_rank;
  return info;
}

std::string model_name(const ModelConfig& model) {
  if (!model.preset.empty()) return model.preset;
  if (model.hf_config.empty()) return "custom";
  // A config.json goes by its folder's name, as a Hugging Face repository does.
  const std::filesystem::path folder =
      std::filesystem::absolute(hf_config_file(model.hf_config)).lexically_normal().parent_path();
  return "hf:" + folder.filename().string();
}

std::string experiment_identity(Experiment experiment) {
  // How it runs, not what it computes.
  experiment.train.threads = 0;
  experiment.policies.call_timeout = PoliciesConfig{}.call_timeout;
  experiment.store.path.clear();
  return sha256_hex(to_toml(experiment));
}

CheckpointIdentity checkpoint_identity(const Experiment& experiment) {
  return {experiment_identity(experiment), code_version()};
}

std::filesystem::path checkpoint_folder(const std::string& database, int64_t run) {
  return std::filesystem::path(database + "-checkpoints") / ("run-" + std::to_string(run));
}

std::vector<PluginRecordRow> plugin_rows(const PolicySet& policies) {
  std::vector<PluginRecordRow> rows;
  for (const PluginRecord& p : policies.records)
    rows.push_back({p.kind, p.name, p.version, p.parameters, p.path, p.sha256});
  return rows;
}

RunDataRow data_row(const DataProvenance& data, const std::optional<TokenizerFile>& tokenizer) {
  RunDataRow row;
  row.kind = data.kind;
  if (data.kind != "synthetic") {
    row.path = data.path;
    row.bytes = data.bytes;
    row.sha256 = data.sha256;
    row.tokens = data.tokens;
  }
  if (const auto& corpus = data.corpus) {
    row.corpus = corpus->name;
    row.corpus_bytes = corpus->bytes;
    row.corpus_sha256 = corpus->sha256;
    row.corpus_sources = corpus->sources;
    row.tokenizer = corpus->tokenizer;
    row.tokenizer_vocab = corpus->tokenizer_vocab;
    row.tokenizer_sha256 = corpus->tokenizer_sha256;
  } else if (tokenizer) {
    // Tokens without a manifest: the tokenizer the run names (checked against a manifest's).
    row.tokenizer = "tokenizer.json " + tokenizer->model + " (" + tokenizer->path + ")";
    row.tokenizer_vocab = tokenizer->vocab_size;
    row.tokenizer_sha256 = tokenizer->sha256;
  }
  return row;
}

}  // namespace lrmoe
