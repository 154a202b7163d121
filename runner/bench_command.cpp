#include "bench_command.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "core/data/token_source.hpp"
#include "core/model/grouped_gemm.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/system/blas_probe.hpp"
#include "core/system/threads.hpp"
#include "core/train/trainer.hpp"
#include "timed_training.hpp"

namespace lrmoe {
namespace {

// Median wall time of `fn` over `repeats` calls.
double median_seconds(const std::function<void()>& fn, int repeats) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto started = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void bench_grouped_gemm(const ModelConfig& c, const std::vector<int64_t>& pairs_per_expert) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> offsets{0};
  for (int64_t n : pairs_per_expert) offsets.push_back(offsets.back() + n);
  const int64_t pairs = offsets.back(), hidden = c.hidden_size, ffn = c.expert_ffn_size;
  auto x = torch::randn({pairs, hidden});
  auto hidden_act = torch::randn({pairs, ffn});
  auto w_gate_up = torch::randn({c.num_experts, 2 * ffn, hidden});
  auto w_down = torch::randn({c.num_experts, hidden, ffn});
  auto gate_up = torch::empty({pairs, 2 * ffn});
  auto out = torch::empty({pairs, hidden});
  // One dense matmul with the same FLOPs: [pairs, hidden] x [hidden, 3 * ffn].
  auto w_dense = torch::randn({3 * ffn, hidden});
  auto dense_out = torch::empty({pairs, 3 * ffn});

  auto grouped = [&] {
    grouped_mm(x, offsets, w_gate_up, true, gate_up);
    grouped_mm(hidden_act, offsets, w_down, true, out);
  };
  // The dense reference gets the whole machine: BLAS threads on every core for this one call.
  auto dense = [&] {
    set_blas_threads(torch::get_num_threads());
    torch::mm_out(dense_out, x, w_dense.t());
    set_blas_threads(1);
  };
  grouped();
  dense();
  // Interleave the two so that machine noise hits both alike.
  std::vector<double> grouped_times, dense_times;
  for (int round = 0; round < 5; ++round) {
    grouped_times.push_back(median_seconds(grouped, 5));
    dense_times.push_back(median_seconds(dense, 5));
  }
  std::sort(grouped_times.begin(), grouped_times.end());
  std::sort(dense_times.begin(), dense_times.end());
  const double flops = 6.0 * static_cast<double>(pairs * hidden * ffn);
  const double grouped_gflops = flops / grouped_times[2] / 1e9;
  const double dense_gflops = flops / dense_times[2] / 1e9;
  const auto busy = std::count_if(pairs_per_expert.begin(), pairs_per_expert.end(),
                                  [](int64_t n) { return n > 0; });
  fmt::print(
      "grouped GEMM        {} pairs over {} experts ({} non-empty), hidden {}, expert ffn {}\n",
      pairs, c.num_experts, busy, hidden, ffn);
  fmt::print("  grouped (per-expert slices)   {:8.1f} GFLOP/s\n", grouped_gflops);
  fmt::print("  dense matmul, same FLOPs      {:8.1f} GFLOP/s (one BLAS call on {} threads)\n",
             dense_gflops, torch::get_num_threads());
  fmt::print("  ratio grouped / dense         {:8.3f}\n", grouped_gflops / dense_gflops);
}

}  // namespace

int bench_command(const ExperimentSource& source, int64_t steps) {
  Experiment e = timed_training_experiment(source, steps);
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);
  configure_threads(e.train.threads);  // as training will run, before measuring the BLAS
  const BlasReport blas = probe_blas();
  Trainer trainer(e, *data, std::make_shared<const PolicySet>(load_policy_set(e.policies)));
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
  fmt::print("BLAS                {} ({:.0f} GFLOP/s fp32 matmul), {} intra-op threads\n",
             blas.library, blas.matmul_gflops, torch::get_num_threads());
  fmt::print("training            {:.0f} tokens/s ({:.1f} ms per step)\n",
             static_cast<double>(tokens) / step_seconds,
             1e3 * step_seconds / static_cast<double>(steps));
  fmt::print("MoE-layer share     {:.1f}% of step time\n", 100.0 * moe_seconds / step_seconds);
  const auto& last = observer.reports.back();
  if (!last.expert_load.empty())
    bench_grouped_gemm(trainer.model_config(), last.expert_load.front().pairs_per_expert);
  return 0;
}

}  // namespace lrmoe
