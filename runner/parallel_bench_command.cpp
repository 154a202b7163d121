#include "parallel_bench_command.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <stdexcept>

#include "core/data/token_source.hpp"
#include "core/distributed/collectives.hpp"
#include "core/distributed/launch_environment.hpp"
#include "core/plugins/policy_set.hpp"
#include "core/train/trainer.hpp"
#include "local_launcher.hpp"
#include "timed_training.hpp"

namespace lrmoe {
namespace {

// What one launch measured, as process 0 wrote it: "name value" lines.
using Figures = std::map<std::string, double>;

Figures read_figures(const std::string& path) {
  std::ifstream in(path);
  Figures figures;
  std::string name;
  double value = 0;
  while (in >> name >> value) figures[name] = value;
  return figures;
}

// This process's all-to-all-v over the timed steps, from the gathered per-process measurements.
ExchangeMeasurement pipeline_exchange(const std::vector<StepReport>& reports, int64_t process) {
  ExchangeMeasurement total;
  for (const StepReport& report : reports) {
    for (const LayerStepStatistics& layer : report.layers) {
      for (const ProcessStepMeasurement& m : layer.processes) {
        if (m.process == process) total += m.exchange;
      }
    }
  }
  return total;
}

// This process's own all-to-all-v calls over the timed steps, in call order.
std::vector<ExchangeCallSizes> exchange_calls(const std::vector<StepReport>& reports) {
  std::vector<ExchangeCallSizes> calls;
  for (const StepReport& report : reports) {
    for (const LayerStepStatistics& layer : report.layers) {
      calls.insert(calls.end(), layer.exchange.call_sizes.begin(), layer.exchange.call_sizes.end());
    }
  }
  return calls;
}

int64_t total(const std::vector<int64_t>& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

// The same calls bare: each of `calls` again, with the same bytes to and from every process
// (this one included), from one buffer allocated beforehand; the wall time. Every process
// replays its own calls, which match its peers' as they did in training.
double bare_exchange_seconds(Collectives& collectives,
                             const std::vector<ExchangeCallSizes>& calls) {
  int64_t largest = 0;
  for (const ExchangeCallSizes& call : calls) largest = std::max(largest, total(call.sent_bytes));
  const torch::Tensor buffer = torch::ones({largest, 1}, torch::kUInt8);
  auto make = [&](const ExchangeCallSizes& call) {
    collectives.exchange_rows(buffer.narrow(0, 0, total(call.sent_bytes)), call.sent_bytes,
                              call.received_bytes);
  };
  for (const ExchangeCallSizes& call : calls) make(call);  // warm-up: connections, buffers
  collectives.barrier();
  double seconds = 0;
  for (const ExchangeCallSizes& call : calls) {
    const auto started = std::chrono::steady_clock::now();
    make(call);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  return seconds;
}

std::vector<std::string> worker_arguments(const ExperimentSource& source, int64_t steps,
                                          const std::string& result) {
  std::vector<std::string> args{"bench-parallel-worker"};
  const std::vector<std::string> experiment = experiment_arguments(source);
  args.insert(args.end(), experiment.begin(), experiment.end());
  args.insert(args.end(), {"--steps", std::to_string(steps), "--result", result});
  return args;
}

Figures measure(const ExperimentSource& source, int64_t steps, int64_t processes,
                const std::string& folder) {
  const std::string result = fmt::format("{}/p{}.txt", folder, processes);
  LocalLaunchOptions options;
  options.processes = processes;
  options.arguments = worker_arguments(source, steps, result);
  const int code = launch_local(options);
  if (code != 0)
    throw std::runtime_error(
        fmt::format("bench-parallel: the run on {} processes failed", processes));
  return read_figures(result);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::string rate(double bytes_per_second) {
  return fmt::format("{:8.1f} MB/s", bytes_per_second / 1e6);
}

}  // namespace

int parallel_bench_worker(const ExperimentSource& source, int64_t steps,
                          const std::string& result_path) {
  spdlog::set_level(spdlog::level::warn);
  Experiment e = timed_training_experiment(source, steps);
  const LaunchEnvironment launch = read_launch_environment(e.cluster, std::getenv);
  check_processes_fit(e, launch);
  e.train.threads = threads_per_process(e.train.threads, launch);
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);
  auto collectives = Collectives::connect(launch, e.cluster, e.train);
  Trainer trainer(e, *data, load_located_policy_set(e.policies, experiment_place(source)),
                  collectives);
  CollectingObserver observer;
  trainer.run(observer);

  const std::vector<StepReport> timed = observer.timed();
  double step_seconds = 0;
  for (const StepReport& report : timed) step_seconds += report.step_seconds;
  Figures figures{{"steps", static_cast<double>(timed.size())}, {"step_seconds", step_seconds}};
  if (!collectives->single()) {
    // Process 0's side of both: the pipeline's calls, then the same calls bare.
    const ExchangeMeasurement pipeline = pipeline_exchange(timed, 0);
    figures["pipeline_bytes"] = static_cast<double>(pipeline.bytes_sent);
    figures["pipeline_seconds"] = pipeline.seconds;
    figures["calls"] = static_cast<double>(pipeline.calls);
    figures["bare_seconds"] = bare_exchange_seconds(*collectives, exchange_calls(timed));
  }
  if (collectives->rank() == 0) {
    std::ofstream out(result_path);
    for (const auto& [name, value] : figures)
      out << name << ' ' << fmt::format("{:.17g}", value) << '\n';
  }
  return 0;
}

int parallel_bench_command(const ExperimentSource& source, int64_t steps, int64_t processes,
                           int64_t rounds) {
  if (processes < 2)
    throw std::runtime_error("bench-parallel: -n must be at least 2 (it compares with 1 process)");
  const Experiment e = timed_training_experiment(source, steps);
  LaunchEnvironment launch;
  launch.launcher = "bench-parallel";
  launch.world_size = processes;
  check_processes_fit(e, launch);
  // The plugins are checked here, once, rather than in every child process.
  load_located_policy_set(e.policies, experiment_place(source));

  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / fmt::format("lrmoe-bench-parallel-{}", getpid());
  std::filesystem::create_directories(folder);
  // One process, then P, `rounds` times: the same experiment and steps in fresh processes each
  // time, interleaved so that the machine's noise hits both alike; medians are reported.
  std::vector<double> step_one, step_many, pipeline_seconds, bare_seconds;
  Figures many;
  for (int64_t round = 0; round < rounds; ++round) {
    const Figures one = measure(source, steps, 1, folder.string());
    many = measure(source, steps, processes, folder.string());
    step_one.push_back(one.at("step_seconds") / one.at("steps"));
    step_many.push_back(many.at("step_seconds") / many.at("steps"));
    pipeline_seconds.push_back(many.at("pipeline_seconds"));
    bare_seconds.push_back(many.at("bare_seconds"));
  }
  std::filesystem::remove_all(folder);

  // The bytes and calls are the same in every round: the plan is deterministic.
  const double calls = many.at("calls");
  const double pipeline_rate = many.at("pipeline_bytes") / median(pipeline_seconds);
  const double bare_rate = many.at("pipeline_bytes") / median(bare_seconds);
  fmt::print(
      "\nexperiment          {} (model {}), {} ranks, {} timed steps after {} warm-up steps, "
      "median of {} rounds\n",
      e.experiment.name, e.model.preset, e.cluster.ranks, steps, kWarmupSteps, rounds);
  fmt::print(
      "all-to-all-v        process 0 of {} on 127.0.0.1 (c10d gloo): {:.0f} calls, {:.1f} KiB sent "
      "to other "
      "processes per call\n",
      processes, calls, many.at("pipeline_bytes") / calls / 1024.0);
  fmt::print("  pipeline (in training)        bus bandwidth {}  ({:.0f} us per call)\n",
             rate(pipeline_rate), 1e6 * median(pipeline_seconds) / calls);
  fmt::print("  bare c10d, the same calls     bus bandwidth {}  ({:.0f} us per call)\n",
             rate(bare_rate), 1e6 * median(bare_seconds) / calls);
  fmt::print("  ratio pipeline / bare         {:8.3f}\n", pipeline_rate / bare_rate);
  fmt::print(
      "step time           1 process {:.1f} ms, {} processes {:.1f} ms: ratio {} / 1 = {:.3f}\n",
      1e3 * median(step_one), processes, 1e3 * median(step_many), processes,
      median(step_many) / median(step_one));
  return 0;
}

}  // namespace lrmoe
