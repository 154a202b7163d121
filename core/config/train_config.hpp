#pragma once
// The [train] section of an experiment: optimisation, evaluation and the target. Field meanings,
// defaults and ranges are documented once, in the schema table (core/config/experiment_schema.cpp;
// `lrmoe schema` prints it).

#include <cstdint>

namespace lrmoe {

// Where training runs (core/device/compute_device.hpp): auto is cuda:LOCAL_RANK when a GPU is
// visible to a CUDA build, else the CPU.
enum class DeviceChoice { Auto, Cpu, Cuda };
// Compute precision: bf16 runs the GEMMs and activations in bfloat16 over fp32 master weights,
// optimizer state and router (Note [Mixed precision] in docs/notes.md).
enum class Precision { Fp32, Bf16 };
// Which grouped GEMM kernel the experts use (core/model/grouped_gemm_choice.hpp).
enum class GroupedGemmChoice { Auto, SliceLoop, GroupedMm };

struct TrainConfig {
  int64_t batch_size = 16;    // sequences per micro-batch
  int64_t micro_batches = 1;  // gradient accumulation
  int64_t seq_len = 64;
  int64_t max_steps = 1000;
  int64_t warmup_steps = 20;
  double lr = 3e-3;
  double min_lr = 3e-4;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0 disables clipping
  int64_t eval_every = 25;
  int64_t eval_batches = 4;
  double target_loss = 0.0;  // stop when the evaluation loss reaches it; 0: run to max_steps
  // evaluate every step once a loss is within this fraction of the target
  double near_target_margin = 0.05;
  int64_t log_every = 10;
  // steps between recorded step timelines (Note [Step trace]): steps 1, 1 + n, 1 + 2n, ...; 0: none
  int64_t trace_every = 10;
  bool traces(int64_t step) const { return trace_every > 0 && (step - 1) % trace_every == 0; }
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0: none (Note [Checkpoints])
  int64_t checkpoint_keep = 2;   // the newest checkpoints kept
  // checkpoint the last step too and keep it once the run finished (for lrmoe export-hf)
  bool keep_final_checkpoint = false;
  int64_t threads = 0;  // intra-op threads; 0: one per core
  DeviceChoice device = DeviceChoice::Auto;
  Precision precision = Precision::Fp32;
  GroupedGemmChoice grouped_gemm = GroupedGemmChoice::Auto;

  bool writes_checkpoints() const { return checkpoint_every > 0 || keep_final_checkpoint; }
};

}  // namespace lrmoe
