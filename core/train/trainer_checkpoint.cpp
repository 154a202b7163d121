// Trainer::save_checkpoint and Trainer::resume_from: what a checkpoint holds (Note
// [Checkpoints] in docs/notes.md).

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <set>

#include "core/plugins/plugin_boundary.hpp"
#include "core/train/checkpoint_archive.hpp"
#include "core/train/trainer.hpp"

namespace lrmoe {
namespace {

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

// The model's parameters and buffers by name: the sharded experts' (`experts`), or every other.
NamedTensors named_state(const torch::nn::Module& model, const std::vector<torch::Tensor>& sharded,
                         bool experts) {
  std::set<const torch::TensorImpl*> in_shard;
  for (const torch::Tensor& p : sharded) in_shard.insert(p.unsafeGetTensorImpl());
  NamedTensors state;
  for (const auto& item : model.named_parameters()) {
    if ((in_shard.count(item.value().unsafeGetTensorImpl()) > 0) == experts)
      state.emplace_back(item.key(), item.value());
  }
  if (!experts) {
    for (const auto& item : model.named_buffers()) state.emplace_back(item.key(), item.value());
  }
  return state;
}

// load_verified, with both of its times logged: the checksum's share of a load is a figure of
// Note [Checkpoints].
void load_logged(torch::serialize::InputArchive& archive, const std::filesystem::path& file,
                 const torch::Device& device) {
  const LoadSeconds took = load_verified(archive, file, device);
  spdlog::info("checkpoint {}: SHA-256 verified in {:.3f} s, then read in {:.3f} s",
               file.filename().string(), took.verify, took.read);
}

}  // namespace

void Trainer::enable_checkpoints(std::optional<CheckpointSettings> settings) {
  if (expert_optimizer_ && !collectives_->single()) {
    // Process 0's settings on every process: the others write their parts into its folder.
    std::string text;
    if (settings) {
      text = fmt::format("{}\n{}\n{}", settings->folder.string(),
                         settings->identity.experiment_sha256, settings->identity.code_version);
    }
    const torch::Tensor mine =
        torch::tensor(std::vector<int64_t>(text.begin(), text.end()), torch::kInt64)
            .reshape({-1, 1});
    std::vector<int64_t> counts;
    const torch::Tensor all = collectives_->gather_rows(mine, &counts).contiguous();
    const int64_t* bytes = all.data_ptr<int64_t>();
    std::vector<std::string> lines(1);
    for (int64_t i = 0; i < counts.front(); ++i) {
      if (bytes[i] == '\n')
        lines.emplace_back();
      else
        lines.back().push_back(static_cast<char>(bytes[i]));
    }
    settings.reset();
    if (lines.size() == 3) settings = CheckpointSettings{lines[0], {lines[1], lines[2]}};
  }
  checkpoints_ = std::move(settings);
}

bool Trainer::on_every_process(bool done) const {
  if (collectives_->single()) return done;
  torch::Tensor failed = torch::tensor({done ? 0 : 1}, torch::kInt64);
  collectives_->max(failed);
  return failed.item<int64_t>() == 0;
}

void Trainer::save_checkpoint_part(int64_t step) const {
  torch::serialize::OutputArchive archive;
  write_identity(archive, step, checkpoints_->identity);
  archive.write("process", c10::IValue(collectives_->rank()));
  write_state(archive, "experts", named_state(*model_, sharded_parameters_, /*experts=*/true),
              *expert_optimizer_);
  write_atomically(checkpoint_part_path(checkpoints_->folder, step, collectives_->rank()),
                   [&](const ByteSink& sink) { archive.save_to(sink); });
}

void Trainer::restore_checkpoint_part(const std::filesystem::path& main, int64_t step,
                                      const CheckpointIdentity& expected) {
  const std::filesystem::path file =
      checkpoint_part_path(main.parent_path(), step, collectives_->rank());
  if (!std::filesystem::exists(file)) {
    throw CheckpointError(fmt::format(
        "{}: this process's part of the checkpoint, {}, is missing; resume from an earlier "
        "checkpoint by removing this one",
        main.string(), file.filename().string()));
  }
  try {
    torch::serialize::InputArchive archive;
    load_logged(archive, file, device_);
    const int64_t part_step = read_identity(archive, file, expected);
    const int64_t process = read_value(archive, "process").toInt();
    if (part_step != step || process != collectives_->rank()) {
      throw CheckpointError(
          fmt::format("{}: holds step {} of process {}, not step {} of process {}", file.string(),
                      part_step, process, step, collectives_->rank()));
    }
    read_state(archive, "experts", named_state(*model_, sharded_parameters_, /*experts=*/true),
               *expert_optimizer_, file);
  } catch (...) {
    rethrow_as_unreadable(file);
  }
}

void Trainer::save_checkpoint(int64_t step, const TrainingOutcome& outcome,
                              std::optional<double> last_eval) const {
  if (!checkpoints_) return;
  const bool parts = expert_optimizer_ != nullptr;
  // Parts first, each whole or absent; the main file only once every part is on the disk, so a
  // checkpoint's main file means its set is whole (Note [Checkpoints]).
  if (parts) {
    std::optional<CheckpointError> failed;
    try {
      save_checkpoint_part(step);
    } catch (const CheckpointError& error) {
      failed = error;
    }
    if (!on_every_process(!failed)) {
      if (failed) throw *failed;
      throw CheckpointError(fmt::format(
          "cannot write checkpoint {}: another process could not write its part (its log says "
          "why); the previous checkpoint is kept",
          checkpoint_path(checkpoints_->folder, step).string()));
    }
  }
  std::optional<CheckpointError> failed;
  if (collectives_->rank() == 0) {
    try {
      save_main_checkpoint(step, outcome, last_eval);
      prune_checkpoints(checkpoints_->folder, experiment_.train.checkpoint_keep);
    } catch (const CheckpointError& error) {
      failed = error;
    }
  }
  // With parts every process writes, and they stop together when process 0 could not.
  if (parts ? !on_every_process(!failed) : failed.has_value()) {
    if (failed) throw *failed;
    throw CheckpointError(
        fmt::format("cannot write checkpoint {}: process 0 could not (its log says why)",
                    checkpoint_path(checkpoints_->folder, step).string()));
  }
}

void Trainer::save_main_checkpoint(int64_t step, const TrainingOutcome& outcome,
                                   std::optional<double> last_eval) const {
  torch::serialize::OutputArchive archive;
  write_identity(archive, step, checkpoints_->identity);
  archive.write("processes", c10::IValue(collectives_->size()));
  archive.write("totals", totals_tensor(outcome, last_eval));
  write_state(archive, "model", named_state(*model_, sharded_parameters_, /*experts=*/false),
              *optimizer_);
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
          call_plugin(policies_->records.at(kind).label, "save_state",
                      [&] { return policies[kind]->save_state(); });
      archive.write(fmt::format("policy_state_{}", kind),
                    torch::tensor(std::vector<int64_t>(state.begin(), state.end()), torch::kInt64)
                        .to(torch::kUInt8));
    }
  }
  write_atomically(checkpoint_path(checkpoints_->folder, step),
                   [&](const ByteSink& sink) { archive.save_to(sink); });
}

int64_t Trainer::resume_from(const std::filesystem::path& file,
                             const CheckpointIdentity& expected) {
  torch::serialize::InputArchive archive;
  int64_t step = 0;
  try {
    // Tensors come to the training device: parameters and optimizer state are read in place.
    load_logged(archive, file, device_);
    step = read_identity(archive, file, expected);
    const int64_t processes = read_value(archive, "processes").toInt();
    if (expert_optimizer_ && processes != collectives_->size()) {
      throw CheckpointError(fmt::format(
          "{}: written by {} processes, each holding its own experts, and this run has {}: "
          "resume it on {} (lrmoe resume does); experts are not resharded",
          file.string(), processes, collectives_->size(), processes));
    }
    read_state(archive, "model", named_state(*model_, sharded_parameters_, /*experts=*/false),
               *optimizer_, file);
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
        call_plugin(policies_->records.at(kind).label, "restore_state", [&] {
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
  } catch (...) {
    rethrow_as_unreadable(file);
  }
  if (expert_optimizer_) restore_checkpoint_part(file, step, expected);
  first_step_ = step + 1;
  return step;
}

}  // namespace lrmoe
