// Trainer::save_checkpoint and Trainer::resume_from: what a checkpoint holds (Note
// [Checkpoints] in docs/notes.md).

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "core/plugins/plugin_boundary.hpp"
#include "core/train/trainer.hpp"

namespace lrmoe {
namespace {

// Raised when what a checkpoint holds changes; a checkpoint of another format is refused.
constexpr int64_t kCheckpointFormat = 3;  // 3: no previous owners (2 had them)
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// The run's totals and last evaluation loss as one float64 tensor: bit for bit, NaN for none.
torch::Tensor totals_tensor(const TrainingOutcome& o, std::optional<double> last_eval) {
  return torch::tensor(
      std::vector<double>{static_cast<double>(o.steps), o.step_seconds, o.moe_seconds,
                          o.moe_critical_seconds, o.moe_modeled_seconds,
                          static_cast<double>(o.tokens), o.final_train_loss,
                          o.final_eval_loss.value_or(kNone), last_eval.value_or(kNone)},
      torch::kFloat64);
}

std::optional<double> unless_nan(double value) {
  return std::isnan(value) ? std::nullopt : std::optional<double>(value);
}

// [earlier passes, experts] int64 on the CPU.
torch::Tensor history_tensor(const std::vector<std::vector<int64_t>>& history, int64_t experts) {
  torch::Tensor t = torch::zeros({static_cast<int64_t>(history.size()), experts}, torch::kInt64);
  for (std::size_t i = 0; i < history.size(); ++i)
    std::copy(history[i].begin(), history[i].end(), t[static_cast<int64_t>(i)].data_ptr<int64_t>());
  return t;
}

std::vector<std::vector<int64_t>> history_rows(const torch::Tensor& t) {
  const torch::Tensor rows = t.to(torch::kCPU).contiguous();
  std::vector<std::vector<int64_t>> history;
  for (int64_t i = 0; i < rows.size(0); ++i) {
    const int64_t* row = rows[i].data_ptr<int64_t>();
    history.emplace_back(row, row + rows.size(1));
  }
  return history;
}

std::vector<Policy*> policies_of(const PolicySet& set) {
  return {set.placement.get(), set.metric.get(), set.selection.get(), set.routing.get()};
}

c10::IValue read_value(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value;
}

torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  return tensor.to(torch::kCPU);
}

}  // namespace

void Trainer::save_checkpoint(int64_t step, const TrainingOutcome& outcome,
                              std::optional<double> last_eval) const {
  if (!checkpoints_) return;
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(kCheckpointFormat));
  archive.write("step", c10::IValue(step));
  archive.write("experiment_sha256", c10::IValue(checkpoints_->identity.experiment_sha256));
  archive.write("code_version", c10::IValue(checkpoints_->identity.code_version));
  archive.write("totals", totals_tensor(outcome, last_eval));
  torch::serialize::OutputArchive model;
  model_->save(model);
  archive.write("model", model);
  torch::serialize::OutputArchive optimizer;
  optimizer_->save(optimizer);
  archive.write("optimizer", optimizer);
  {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    archive.write("cpu_generator", generator.get_state());
  }
  for (std::size_t l = 0; l < pipelines_.size(); ++l) {
    archive.write(fmt::format("history_{}", l),
                  history_tensor(pipelines_[l]->history(), model_config_.num_experts));
  }
  if (policies_) {
    const std::vector<Policy*> policies = policies_of(*policies_);
    for (std::size_t kind = 0; kind < policies.size(); ++kind) {
      const std::vector<uint8_t> state =
          call_plugin([&] { return policies_->records.at(kind).label(); }, "save_state",
                      [&] { return policies[kind]->save_state(); });
      archive.write(fmt::format("policy_state_{}", kind),
                    torch::tensor(std::vector<int64_t>(state.begin(), state.end()), torch::kInt64)
                        .to(torch::kUInt8));
    }
  }
  write_atomically(checkpoint_path(checkpoints_->folder, step),
                   [&](const std::string& temporary) { archive.save_to(temporary); });
  prune_checkpoints(checkpoints_->folder, experiment_.train.checkpoint_keep);
}

int64_t Trainer::resume_from(const std::filesystem::path& file,
                             const CheckpointIdentity& expected) {
  torch::serialize::InputArchive archive;
  int64_t step = 0;
  try {
    // Tensors come to the training device: parameters and optimizer state are read in place.
    archive.load_from(file.string(), device_);
    const int64_t format = read_value(archive, "format").toInt();
    if (format != kCheckpointFormat) {
      throw CheckpointError(fmt::format(
          "{}: checkpoint format {}, this build reads format {}; resume it with the build that "
          "wrote it",
          file.string(), format, kCheckpointFormat));
    }
    check_checkpoint_identity(file,
                              {read_value(archive, "experiment_sha256").toStringRef(),
                               read_value(archive, "code_version").toStringRef()},
                              expected);
    step = read_value(archive, "step").toInt();
    torch::serialize::InputArchive model;
    archive.read("model", model);
    model_->load(model);
    torch::serialize::InputArchive optimizer;
    archive.read("optimizer", optimizer);
    optimizer_->load(optimizer);
    {
      const torch::Tensor state = read_tensor(archive, "cpu_generator");
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
    for (std::size_t l = 0; l < pipelines_.size(); ++l) {
      pipelines_[l]->restore_history(
          history_rows(read_tensor(archive, fmt::format("history_{}", l))));
    }
    if (policies_) {
      const std::vector<Policy*> policies = policies_of(*policies_);
      for (std::size_t kind = 0; kind < policies.size(); ++kind) {
        const torch::Tensor bytes =
            read_tensor(archive, fmt::format("policy_state_{}", kind)).contiguous();
        const uint8_t* data = bytes.data_ptr<uint8_t>();
        call_plugin(
            [&] { return policies_->records.at(kind).label(); }, "restore_state",
            [&] {
              policies[kind]->restore_state(std::vector<uint8_t>(data, data + bytes.numel()));
            });
      }
    }
    const torch::Tensor totals = read_tensor(archive, "totals").contiguous();
    const double* t = totals.data_ptr<double>();
    resumed_ = TrainingOutcome{};
    resumed_.steps = static_cast<int64_t>(t[0]);
    resumed_.step_seconds = t[1];
    resumed_.moe_seconds = t[2];
    resumed_.moe_critical_seconds = t[3];
    resumed_.moe_modeled_seconds = t[4];
    resumed_.tokens = static_cast<int64_t>(t[5]);
    resumed_.final_train_loss = t[6];
    resumed_.final_eval_loss = unless_nan(t[7]);
    resumed_last_eval_ = unless_nan(t[8]);
  } catch (const c10::Error& error) {
    throw CheckpointError(fmt::format(
        "{}: cannot read this checkpoint ({}); it is damaged or of another model: resume from "
        "an earlier one by removing it",
        file.string(), error.what_without_backtrace()));
  }
  first_step_ = step + 1;
  return step;
}

}  // namespace lrmoe
