// Training on a device and in a precision (Note [Mixed precision]): bf16 over fp32 master
// weights follows fp32, every grouped GEMM kernel trains alike, a device this build or machine
// lacks is refused by name, and, tagged [gpu], a GPU run follows the CPU's.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/config/experiment_loader.hpp"
#include "core/data/token_source.hpp"
#include "core/device/compute_device.hpp"
#include "core/device/cuda_runtime.hpp"
#include "core/plugins/plugin_catalog.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/train/trainer.hpp"
#include "support/gpu.hpp"

using namespace lrmoe;

namespace {

Experiment tiny_lrmoe(const std::vector<std::string>& overrides) {
  std::vector<std::string> all{
      "train.max_steps=4",    "train.batch_size=4", "train.micro_batches=1", "train.seq_len=16",
      "train.warmup_steps=1", "train.eval_every=4", "policies.bundle=lrmoe", "cluster.ranks=2"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_experiment(std::string(LRMOE_SOURCE_DIR) + "/experiments/tiny-moe.toml", all);
}

struct Trained {
  std::vector<double> losses;
  GroupedGemmKernel kernel = GroupedGemmKernel::SliceLoop;
  int64_t timing_waits = 0;
};

struct Losses : TrainingObserver {
  void on_step(const StepReport& r) override {
    values.push_back(r.train_loss);
    measured_peaks.push_back(r.rank_measured_peak);
  }
  std::vector<double> values;
  std::vector<std::vector<std::optional<MeasuredPeaks>>> measured_peaks;  // [step][rank]
};

Trained train_and_observe(const Experiment& e, Losses* observed = nullptr) {
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);
  auto policies = std::make_shared<const PolicySet>(
      create_policy_set(e.policies, PluginCatalog::discover({LRMOE_BUILTIN_PLUGIN_DIR})));
  Trainer trainer(e, *data, policies);
  Losses losses;
  trainer.run(observed ? *observed : losses);
  return {(observed ? *observed : losses).values, trainer.grouped_gemm().kernel,
          trainer.timing_waits()};
}

void require_follows(const std::vector<double>& losses, const std::vector<double>& reference,
                     double relative) {
  REQUIRE(losses.size() == reference.size());
  for (std::size_t i = 0; i < losses.size(); ++i) {
    INFO("step " << i + 1 << ": " << losses[i] << " against " << reference[i]);
    REQUIRE(std::isfinite(losses[i]));
    REQUIRE(std::abs(losses[i] - reference[i]) <= relative * reference[i]);
  }
}

}  // namespace

TEST_CASE("bf16 training over fp32 master weights follows the fp32 losses", "[device]") {
  const Trained fp32 = train_and_observe(tiny_lrmoe({}));
  const Trained bf16 = train_and_observe(tiny_lrmoe({"train.precision=bf16"}));
  // The first loss differs only by rounding; later ones by rounding fed through a few updates.
  require_follows(bf16.losses, fp32.losses, 0.02);
  CHECK(bf16.losses != fp32.losses);  // the precision was really applied

  const Experiment e = tiny_lrmoe({"train.precision=bf16"});
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);
  Trainer trainer(e, *data);
  Losses losses;
  trainer.run(losses);
  for (const auto& p : trainer.parameters()) REQUIRE(p.scalar_type() == torch::kFloat32);
}

TEST_CASE("every grouped GEMM kernel this LibTorch has trains to the same losses", "[device]") {
  const Trained loop = train_and_observe(tiny_lrmoe({"train.grouped_gemm=slice-loop"}));
  REQUIRE(loop.kernel == GroupedGemmKernel::SliceLoop);
  for (GroupedGemmKernel kernel : available_grouped_gemm_kernels()) {
    if (kernel == GroupedGemmKernel::SliceLoop) continue;
    const Trained other =
        train_and_observe(tiny_lrmoe({std::string("train.grouped_gemm=") + kernel_name(kernel)}));
    REQUIRE(other.kernel == kernel);
    require_follows(other.losses, loop.losses, 1e-4);
  }
}

TEST_CASE("a device the build or the machine lacks is refused by its key", "[device]") {
  REQUIRE(resolve_device(DeviceChoice::Cpu, 0) == torch::Device(torch::kCPU));
  if (torch::cuda::device_count() == 0) {
    REQUIRE(resolve_device(DeviceChoice::Auto, 0) == torch::Device(torch::kCPU));
    REQUIRE_THROWS_WITH(resolve_device(DeviceChoice::Cuda, 0),
                        Catch::Contains("train.device") && Catch::Contains("cpu"));
    REQUIRE(resolve_backend(CollectiveBackend::Auto, torch::kCPU) == CollectiveBackend::Gloo);
  } else {
    const auto visible = static_cast<int64_t>(torch::cuda::device_count());
    REQUIRE(resolve_device(DeviceChoice::Auto, 0) == torch::Device(torch::kCUDA, 0));
    REQUIRE_THROWS_WITH(resolve_device(DeviceChoice::Cuda, visible),
                        Catch::Contains("train.device") && Catch::Contains("CUDA_VISIBLE"));
  }
}

TEST_CASE("on the CPU no allocator peak is measured, rather than a made-up one", "[device]") {
  Losses cpu;
  train_and_observe(tiny_lrmoe({"train.device=cpu"}), &cpu);
  REQUIRE(cpu.measured_peaks.size() == 4);
  for (const auto& ranks : cpu.measured_peaks) {
    REQUIRE(ranks.size() == 2);
    for (const auto& peaks : ranks) CHECK_FALSE(peaks.has_value());
  }
}

TEST_CASE("on a GPU the allocator's peaks are measured per step, forward and backward", "[gpu]") {
  if (!test::gpu_or_skip()) return;
  Losses gpu;
  train_and_observe(tiny_lrmoe({"train.device=cuda", "train.micro_batches=2"}), &gpu);
  for (const auto& ranks : gpu.measured_peaks) {
    for (const auto& peaks : ranks) {
      REQUIRE(peaks.has_value());
      CHECK(peaks->forward > 0);
      CHECK(peaks->backward > 0);
      CHECK(peaks->step >= std::max(peaks->forward, peaks->backward));
    }
  }
}

TEST_CASE("on a GPU, bf16 training follows the CPU's fp32 losses", "[gpu]") {
  if (!test::gpu_or_skip()) return;
  const Trained cpu = train_and_observe(tiny_lrmoe({"train.device=cpu"}));
  const Trained gpu = train_and_observe(tiny_lrmoe({"train.device=cuda", "train.precision=bf16"}));
  require_follows(gpu.losses, cpu.losses, 0.02);
}

TEST_CASE("on a GPU every step's figures and times are read a step late without waiting", "[gpu]") {
  if (!test::gpu_or_skip()) return;
  const Trained gpu = train_and_observe(tiny_lrmoe({"train.device=cuda", "train.micro_batches=2"}));
  CHECK(gpu.losses.size() == 4);
  CHECK(gpu.timing_waits == 0);
}
