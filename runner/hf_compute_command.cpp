#include "runner/hf_compute_command.hpp"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

#include "core/config/experiment_loader.hpp"
#include "core/data/token_source.hpp"
#include "core/hf/hf_export.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/train/trainer.hpp"

namespace lrmoe {

CLI::App* add_hf_compute_command(CLI::App& app, HfComputeOptions& options) {
  CLI::App* command = app.add_subcommand("hf-compute", "")->group("");
  command->add_option("experiment", options.experiment)->required();
  // One value per --set, so that the experiment stays the positional argument.
  command->add_option("--set", options.overrides)->allow_extra_args(false);
  command->add_option("--tokens", options.tokens)->required();
  command->add_option("--out", options.out)->required();
  return command;
}

int hf_compute_command(const HfComputeOptions& options) {
  Experiment experiment = load_experiment(options.experiment, options.overrides);
  std::string why_not;
  const std::optional<HfFamily> family = hf_family(experiment.model, &why_not);
  if (!family) throw std::invalid_argument("hf-compute: " + why_not);
  const torch::Tensor tokens = SafetensorsFile(options.tokens).read("tokens");
  if (tokens.dim() != 2 || tokens.scalar_type() != torch::kInt64 || tokens.size(1) < 2)
    throw std::invalid_argument("hf-compute: tokens must be [batch, seq + 1] int64");
  const int64_t seq = tokens.size(1) - 1;
  const Batch batch{tokens.narrow(1, 0, seq).contiguous(), tokens.narrow(1, 1, seq).contiguous()};

  auto data = make_token_source(experiment.data, experiment.experiment.seed, seq);
  const auto policies = std::make_shared<const PolicySet>(load_policy_set(experiment.policies));
  Trainer trainer(experiment, *data, policies);
  const Trainer::ForwardBackward result = trainer.forward_backward(batch);

  const std::filesystem::path out(options.out);
  write_safetensors(out / "outputs.safetensors",
                    {{"logits", result.logits.to(torch::kFloat32)},
                     {"loss", result.loss.to(torch::kFloat32).reshape({1})}},
                    {});
  HfExportSource gradients;
  for (const auto& [name, tensor] : trainer.named_tensors()) {
    if (tensor.grad().defined()) gradients.tensors.emplace_back(name, tensor.grad());
  }
  std::map<std::string, std::string> written;
  write_hf_shard(out, "gradients.safetensors", trainer.model_config(), *family, gradients,
                 torch::kFloat32, written);
  fmt::print("hf-compute: loss {:.9g}, {} gradients in {}\n", result.loss.item<float>(),
             written.size(), out.string());
  return 0;
}

}  // namespace lrmoe
