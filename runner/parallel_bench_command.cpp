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
#include <thread>

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

// This process's own all-to-all-v calls over the timed steps, in the order it made them. A step's
// report lists them layer by layer, and a layer's calls interleave with the other layers' (the
// forward runs layers up, the backward down, per micro-batch): in entry order they are the
// collective's order, the same on every process, and each follows the one before it in time, as
// the paced replay needs.
std::vector<ExchangeCall> exchange_calls(const std::vector<StepReport>& reports) {
  std::vector<ExchangeCall> calls;
  for (const StepReport& report : reports) {
    for (const LayerStepStatistics& layer : report.layers) {
      calls.insert(calls.end(), layer.exchange.call_log.begin(), layer.exchange.call_log.end());
    }
  }
  std::stable_sort(calls.begin(), calls.end(), [](const ExchangeCall& a, const ExchangeCall& b) {
    return a.entered_ns < b.entered_ns;
  });
  return calls;
}

int64_t total(const std::vector<int64_t>& values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

// Bytes this process sent to the others over `calls`.
int64_t bytes_to_others(const std::vector<ExchangeCall>& calls, int64_t me) {
  int64_t bytes = 0;
  for (const ExchangeCall& call : calls)
    bytes += total(call.sent_bytes) - call.sent_bytes[static_cast<std::size_t>(me)];
  return bytes;
}

// The wall time of `calls` in this process, waiting for the peers included.
double call_seconds(const std::vector<ExchangeCall>& calls) {
  int64_t nanoseconds = 0;
  for (const ExchangeCall& call : calls) nanoseconds += call.left_ns - call.entered_ns;
  return 1e-9 * static_cast<double>(nanoseconds);
}

// The time of each of `calls` in this process, counted from the moment the last process entered
// it: the call's own time, without the waiting for a peer to reach it. Every process makes the
// same calls in the same order, and their entry times compare because bench-parallel starts
// every process on this host (host_clock_ns). Collective: every process calls it.
std::vector<double> seconds_after_last_entry(Collectives& collectives,
                                             const std::vector<ExchangeCall>& calls) {
  const auto n = static_cast<int64_t>(calls.size());
  torch::Tensor entered = torch::empty({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) entered[i] = calls[static_cast<std::size_t>(i)].entered_ns;
  const std::vector<int64_t> counts(static_cast<std::size_t>(collectives.size()), n);
  const torch::Tensor last_entry =
      std::get<0>(collectives.gather_rows(entered, counts).view({collectives.size(), n}).max(0));
  const int64_t* last = last_entry.data_ptr<int64_t>();
  std::vector<double> seconds;
  for (int64_t i = 0; i < n; ++i)
    seconds.push_back(1e-9 * static_cast<double>(std::max<int64_t>(
                                 0, calls[static_cast<std::size_t>(i)].left_ns - last[i])));
  return seconds;
}

double sum(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0);
}

// The middle value; of an even count, the upper of the two middle ones (a value that was measured).
double upper_median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The median over calls of bare time / pipeline time: the typical call's ratio, which the rare
// stalls of a shared machine (a whole scheduler time slice, milliseconds) do not move as they
// move sums.
double median_call_ratio(const std::vector<double>& pipeline, const std::vector<double>& bare) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < pipeline.size(); ++i)
    if (pipeline[i] > 0) ratios.push_back(bare[i] / pipeline[i]);
  return ratios.empty() ? 0 : upper_median(ratios);
}

// How bare calls follow each other: back to back, or each after the idle time that preceded
// the pipeline's call in training (its compute between calls, spent asleep here).
enum class Pacing { BackToBack, AsInTraining };

// The same calls bare: each of `calls` again, with the same bytes to and from every process
// (this one included), from one buffer allocated beforehand, entry and exit timed as the
// pipeline's are. Every process replays its own calls, which match its peers' as they did in
// training.
std::vector<ExchangeCall> bare_exchange_calls(Collectives& collectives,
                                              const std::vector<ExchangeCall>& calls,
                                              Pacing pacing) {
  int64_t largest = 0;
  for (const ExchangeCall& call : calls) largest = std::max(largest, total(call.sent_bytes));
  const torch::Tensor buffer = torch::ones({largest, 1}, torch::kUInt8);
  auto make = [&](const ExchangeCall& call) {
    collectives.exchange_rows(buffer.narrow(0, 0, total(call.sent_bytes)), call.sent_bytes,
                              call.received_bytes);
  };
  for (const ExchangeCall& call : calls) make(call);  // warm-up: connections, buffers
  collectives.barrier();
  std::vector<ExchangeCall> bare = calls;
  for (std::size_t i = 0; i < bare.size(); ++i) {
    if (pacing == Pacing::AsInTraining && i > 0)
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(calls[i].entered_ns - calls[i - 1].left_ns));
    bare[i].entered_ns = host_clock_ns();
    make(bare[i]);
    bare[i].left_ns = host_clock_ns();
  }
  return bare;
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
    const std::vector<ExchangeCall> pipeline = exchange_calls(timed);
    const std::vector<ExchangeCall> bare =
        bare_exchange_calls(*collectives, pipeline, Pacing::BackToBack);
    const std::vector<ExchangeCall> paced =
        bare_exchange_calls(*collectives, pipeline, Pacing::AsInTraining);
    figures["pipeline_bytes"] = static_cast<double>(bytes_to_others(pipeline, collectives->rank()));
    figures["calls"] = static_cast<double>(pipeline.size());
    figures["pipeline_seconds"] = call_seconds(pipeline);
    const std::vector<double> pipeline_own = seconds_after_last_entry(*collectives, pipeline);
    const std::vector<double> bare_own = seconds_after_last_entry(*collectives, bare);
    const std::vector<double> paced_own = seconds_after_last_entry(*collectives, paced);
    figures["pipeline_own_seconds"] = sum(pipeline_own);
    figures["bare_seconds"] = call_seconds(bare);
    figures["bare_own_seconds"] = sum(bare_own);
    figures["bare_median_call_ratio"] = median_call_ratio(pipeline_own, bare_own);
    figures["paced_seconds"] = call_seconds(paced);
    figures["paced_own_seconds"] = sum(paced_own);
    figures["paced_median_call_ratio"] = median_call_ratio(pipeline_own, paced_own);
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
  std::vector<double> step_one, step_many;
  // Per round, process 0's exchange seconds and median call ratios under these names.
  const std::vector<std::string> exchange_figures{
      "pipeline_seconds",  "pipeline_own_seconds",   "bare_seconds",
      "bare_own_seconds",  "bare_median_call_ratio", "paced_seconds",
      "paced_own_seconds", "paced_median_call_ratio"};
  std::map<std::string, std::vector<double>> exchange_rounds;
  Figures many;
  for (int64_t round = 0; round < rounds; ++round) {
    const Figures one = measure(source, steps, 1, folder.string());
    many = measure(source, steps, processes, folder.string());
    step_one.push_back(one.at("step_seconds") / one.at("steps"));
    step_many.push_back(many.at("step_seconds") / many.at("steps"));
    for (const std::string& name : exchange_figures) exchange_rounds[name].push_back(many.at(name));
  }
  std::filesystem::remove_all(folder);

  // The bytes and calls are the same in every round: the plan is deterministic.
  const double calls = many.at("calls");
  const double bytes = many.at("pipeline_bytes");
  auto rate_of = [&](const std::string& name) {
    return bytes / upper_median(exchange_rounds[name]);
  };
  auto column = [&](const std::string& name) {
    return fmt::format("{} {:6.0f} us per call", rate(rate_of(name)),
                       1e6 * upper_median(exchange_rounds[name]) / calls);
  };
  fmt::print(
      "\nexperiment          {} (model {}), {} ranks, {} timed steps after {} warm-up steps, "
      "median of {} rounds\n",
      e.experiment.name, e.model.preset, e.cluster.ranks, steps, kWarmupSteps, rounds);
  fmt::print(
      "all-to-all-v        process 0 of {} on 127.0.0.1 (c10d gloo): {:.0f} calls, {:.1f} KiB sent "
      "to other processes per call; bus bandwidth and time per call\n",
      processes, calls, bytes / calls / 1024.0);
  fmt::print("                                {:<36}{}\n", "whole call",
             "from the last process's entry");
  fmt::print("  pipeline (in training)        {:<36}{}\n", column("pipeline_seconds"),
             column("pipeline_own_seconds"));
  fmt::print("  bare c10d, back to back       {:<36}{}\n", column("bare_seconds"),
             column("bare_own_seconds"));
  fmt::print("  bare c10d, paced as training  {:<36}{}\n", column("paced_seconds"),
             column("paced_own_seconds"));
  auto ratio = [&](const std::string& bare) {
    return fmt::format("{:<36.3f}{:.3f} (median call {:.3f})",
                       rate_of("pipeline_seconds") / rate_of(bare + "_seconds"),
                       rate_of("pipeline_own_seconds") / rate_of(bare + "_own_seconds"),
                       upper_median(exchange_rounds[bare + "_median_call_ratio"]));
  };
  fmt::print("  ratio pipeline / back to back {}\n", ratio("bare"));
  fmt::print("  ratio pipeline / paced        {}\n", ratio("paced"));
  // What fusing calls cuts: the exchange's time per step, not per call.
  fmt::print(
      "per step            {:.0f} all-to-all-v calls, {:.1f} ms in them (whole calls), {:.1f} ms "
      "from the last process's entry\n",
      calls / static_cast<double>(steps),
      1e3 * upper_median(exchange_rounds["pipeline_seconds"]) / static_cast<double>(steps),
      1e3 * upper_median(exchange_rounds["pipeline_own_seconds"]) / static_cast<double>(steps));
  fmt::print(
      "step time           1 process {:.1f} ms, {} processes {:.1f} ms: ratio {} / 1 = {:.3f}\n",
      1e3 * upper_median(step_one), processes, 1e3 * upper_median(step_many), processes,
      upper_median(step_many) / upper_median(step_one));
  return 0;
}

}  // namespace lrmoe
