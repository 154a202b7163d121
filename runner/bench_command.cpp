#include "bench_command.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/data/token_source.hpp"
#include "core/device/compute_device.hpp"
#include "core/model/grouped_gemm.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/system/blas_probe.hpp"
#include "core/system/host_info.hpp"
#include "core/system/threads.hpp"
#include "core/train/trainer.hpp"
#include "dense_gemm_reference.hpp"
#include "timed_training.hpp"

namespace lrmoe {
namespace {

// Median wall time of `fn` over `repeats` calls, each waited for on `device`.
double median_seconds(const std::function<void()>& fn, int repeats, const torch::Device& device) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    synchronize(device);
    const auto started = std::chrono::steady_clock::now();
    fn();
    synchronize(device);
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The median of five rounds of medians of five calls: interleaved rounds let machine noise hit
// every contender alike.
double round_median_seconds(const std::function<void()>& fn, const torch::Device& device) {
  fn();
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) rounds.push_back(median_seconds(fn, 5, device));
  std::sort(rounds.begin(), rounds.end());
  return rounds[2];
}

// Each grouped GEMM kernel this LibTorch has against one dense GEMM of the same FLOPs, on the
// training device in the compute dtype, with the last step's pairs per expert.
void bench_grouped_gemm(const ModelConfig& c, const std::vector<int64_t>& pairs_per_expert,
                        const torch::Device& device, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> offsets{0};
  for (int64_t n : pairs_per_expert) offsets.push_back(offsets.back() + n);
  const int64_t pairs = offsets.back(), hidden = c.hidden_size, ffn = c.expert_ffn_size;
  const auto options = torch::TensorOptions().device(device).dtype(dtype);
  auto x = torch::randn({pairs, hidden}, options);
  auto hidden_act = torch::randn({pairs, ffn}, options);
  auto w_gate_up = torch::randn({c.num_experts, 2 * ffn, hidden}, options);
  auto w_down = torch::randn({c.num_experts, hidden, ffn}, options);
  DenseGemmReference dense(pairs, hidden, ffn, device, dtype);
  const double flops = dense.flops();
  const double dense_gflops = flops / round_median_seconds([&] { dense.run(); }, device) / 1e9;
  const auto busy = std::count_if(pairs_per_expert.begin(), pairs_per_expert.end(),
                                  [](int64_t n) { return n > 0; });
  fmt::print(
      "grouped GEMM        {} pairs over {} experts ({} non-empty), hidden {}, expert ffn {}, "
      "{} on {}\n",
      pairs, c.num_experts, busy, hidden, ffn, c10::toString(dtype), device.str());
  fmt::print("  dense matmul, same FLOPs      {:8.1f} GFLOP/s{}\n", dense_gflops,
             dense.description());
  const GroupedGemmKernel chosen = grouped_gemm_kernel();
  for (GroupedGemmKernel kernel : available_grouped_gemm_kernels()) {
    set_grouped_gemm_kernel(kernel);
    const double seconds = round_median_seconds(
        [&] {
          grouped_mm(x, offsets, w_gate_up, true);
          grouped_mm(hidden_act, offsets, w_down, true);
        },
        device);
    const double gflops = flops / seconds / 1e9;
    fmt::print("  {:<12} kernel{}       {:8.1f} GFLOP/s, {:.3f} of dense\n", kernel_name(kernel),
               kernel == chosen ? " (chosen)" : "         ", gflops, gflops / dense_gflops);
  }
  set_grouped_gemm_kernel(chosen);
}

}  // namespace

int bench_command(const ExperimentSource& source, int64_t steps) {
  Experiment e = timed_training_experiment(source, steps);
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);
  configure_threads(e.train.threads);  // as training will run, before measuring the BLAS
  const BlasReport blas = probe_blas();
  Trainer trainer(e, *data, load_located_policy_set(e.policies, experiment_place(source)));
  CollectingObserver observer;
  trainer.run(observer);

  double step_seconds = 0, moe_seconds = 0;
  int64_t tokens = 0;
  for (const StepReport& report : observer.timed()) {
    step_seconds += report.step_seconds;
    moe_seconds += report.moe_seconds;
    tokens += report.tokens;
  }
  fmt::print("experiment          {} (model {}), {} timed steps after {} warm-up steps\n",
             e.experiment.name, e.model.preset, steps, kWarmupSteps);
  fmt::print("device              {}, precision {}, LibTorch {}\n",
             device_description(trainer.device()), precision_name(e.train.precision),
             torch_version());
  fmt::print("BLAS                {} ({:.0f} GFLOP/s fp32 matmul), {} intra-op threads\n",
             blas.library, blas.matmul_gflops, torch::get_num_threads());
  fmt::print("training            {:.0f} tokens/s ({:.1f} ms per step)\n",
             static_cast<double>(tokens) / step_seconds,
             1e3 * step_seconds / static_cast<double>(steps));
  fmt::print("MoE-layer share     {:.1f}% of step time\n", 100.0 * moe_seconds / step_seconds);
  // Figures and events are read one step late; none should have had to wait.
  fmt::print("late reads          {} of {} steps' figures waited for the device\n",
             trainer.timing_waits(), e.train.max_steps);
  const auto& last = observer.reports.back();
  if (!last.rank_memory.empty()) {
    const double mib = 1 << 20;
    const std::optional<MeasuredPeaks> measured =
        last.rank_measured_peak.empty() ? std::nullopt : last.rank_measured_peak.front();
    const MemoryPeak& modeled = last.rank_memory.front();
    // The model is of one rank holding its own experts; this process holds every expert's
    // weights and optimizer state unless they are sharded (Note [Memory model]).
    fmt::print(
        "peak memory, rank 0 {:.1f} MiB modeled (liveness timeline, at the {} of MoE layer "
        "{}); {}\n",
        static_cast<double>(modeled.at_peak.total()) / mib, phase_name(modeled.peak.phase),
        modeled.peak.layer,
        measured ? fmt::format("{:.1f} MiB measured (the process's caching allocator; forward "
                               "{:.1f}, backward {:.1f})",
                               static_cast<double>(measured->step) / mib,
                               static_cast<double>(measured->forward) / mib,
                               static_cast<double>(measured->backward) / mib)
                 : std::string("not measured (no caching allocator installed)"));
  }
  if (!last.expert_load.empty())
    bench_grouped_gemm(trainer.model_config(), last.expert_load.front().pairs_per_expert,
                       trainer.device(), compute_dtype(e.train.precision));
  return 0;
}

}  // namespace lrmoe
