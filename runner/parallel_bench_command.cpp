#include "parallel_bench_command.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
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

// This process's own all-to-all-v calls, in the order it made them. A step's report lists them
// layer by layer, and a layer's calls interleave with the other layers' (the forward runs layers
// up, the backward down, per micro-batch): in entry order they are the collective's order, the
// same on every process, and each follows the one before it in time, as the paced replay needs.
std::vector<ExchangeCall> in_entry_order(std::vector<ExchangeCall> calls) {
  std::stable_sort(calls.begin(), calls.end(), [](const ExchangeCall& a, const ExchangeCall& b) {
    return a.entered_ns < b.entered_ns;
  });
  return calls;
}

// This process's peak resident set, in bytes.
double resident_peak_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return 1024.0 * static_cast<double>(usage.ru_maxrss);  // Linux reports KiB
}

// The largest of every process's `value`. Collective.
double largest_over_processes(Collectives& collectives, double value) {
  const torch::Tensor mine = torch::tensor({value}, torch::kFloat64).reshape({1, 1});
  return collectives
      .gather_rows(mine, std::vector<int64_t>(static_cast<std::size_t>(collectives.size()), 1))
      .max()
      .item<double>();
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

// Process 0's side of one kind of transfer under names `kind`.*: the pipeline's calls, then the
// same calls bare, back to back and paced as in training. Collective.
void add_transfer_figures(Figures& figures, const std::string& kind, Collectives& collectives,
                          const std::vector<ExchangeCall>& pipeline) {
  auto set = [&](const std::string& name, double value) { figures[kind + "." + name] = value; };
  set("bytes", static_cast<double>(bytes_to_others(pipeline, collectives.rank())));
  set("calls", static_cast<double>(pipeline.size()));
  const std::vector<double> pipeline_own = seconds_after_last_entry(collectives, pipeline);
  set("pipeline_seconds", call_seconds(pipeline));
  set("pipeline_own_seconds", sum(pipeline_own));
  for (const Pacing pacing : {Pacing::BackToBack, Pacing::AsInTraining}) {
    const std::string name = pacing == Pacing::BackToBack ? "bare" : "paced";
    const std::vector<ExchangeCall> bare = bare_exchange_calls(collectives, pipeline, pacing);
    const std::vector<double> bare_own = seconds_after_last_entry(collectives, bare);
    set(name + "_seconds", call_seconds(bare));
    set(name + "_own_seconds", sum(bare_own));
    set(name + "_median_call_ratio", median_call_ratio(pipeline_own, bare_own));
  }
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
  double measured_peak = -1;  // the largest over the timed steps and every process
  for (const StepReport& report : timed) {
    step_seconds += report.step_seconds;
    for (const std::optional<MeasuredPeaks>& peaks : report.rank_measured_peak)
      if (peaks) measured_peak = std::max(measured_peak, static_cast<double>(peaks->step));
  }
  const ProcessState& holding = trainer.process_states().front();
  Figures figures{{"steps", static_cast<double>(timed.size())},
                  {"step_seconds", step_seconds},
                  {"measured_peak_bytes", measured_peak},
                  {"max_rss_bytes", largest_over_processes(*collectives, resident_peak_bytes())},
                  {"dense_bytes", static_cast<double>(holding.dense_bytes())},
                  {"expert_bytes", static_cast<double>(holding.expert_bytes())},
                  {"optimizer_bytes", static_cast<double>(holding.optimizer_bytes())}};
  if (!collectives->single()) {
    std::vector<ExchangeCall> exchange, parameters;
    double parameters_blocked = 0;
    for (const StepReport& report : timed) {
      for (const LayerStepStatistics& layer : report.layers) {
        parameters_blocked += layer.parameters.blocked_seconds;
        exchange.insert(exchange.end(), layer.exchange.call_log.begin(),
                        layer.exchange.call_log.end());
        parameters.insert(parameters.end(), layer.parameters.call_log.begin(),
                          layer.parameters.call_log.end());
      }
    }
    add_transfer_figures(figures, "exchange", *collectives, in_entry_order(std::move(exchange)));
    // Every process fetches in every pass (even nothing), so all have calls or none.
    if (!parameters.empty()) {
      add_transfer_figures(figures, "parameters", *collectives,
                           in_entry_order(std::move(parameters)));
      figures["parameters.blocked_seconds"] = parameters_blocked;
    }
  }
  if (collectives->rank() == 0) {
    std::ofstream out(result_path);
    for (const auto& [name, value] : figures)
      out << name << ' ' << fmt::format("{:.17g}", value) << '\n';
  }
  return 0;
}

namespace {

// One kind of transfer of a P-process run, against bare c10d: bus bandwidth and time per call,
// medians over the rounds.
void print_transfers(const std::string& title, const std::string& kind,
                     const std::vector<Figures>& rounds, int64_t processes, int64_t steps) {
  const Figures& any = rounds.front();
  if (!any.count(kind + ".calls")) return;
  auto median = [&](const std::string& name) {
    std::vector<double> values;
    for (const Figures& round : rounds) values.push_back(round.at(kind + "." + name));
    return upper_median(values);
  };
  const double calls = any.at(kind + ".calls");
  const double bytes = any.at(kind + ".bytes");  // the same every round: the plan is exact
  auto column = [&](const std::string& name) {
    return fmt::format("{} {:6.0f} us per call", rate(bytes / median(name)),
                       1e6 * median(name) / calls);
  };
  fmt::print(
      "{:<19} process 0 of {} on 127.0.0.1 (c10d gloo): {:.0f} calls, {:.1f} KiB sent to other "
      "processes per call; bus bandwidth and time per call\n",
      title, processes, calls, bytes / calls / 1024.0);
  fmt::print("                                {:<36}{}\n", "whole call",
             "from the last process's entry");
  fmt::print("  pipeline (in training)        {:<36}{}\n", column("pipeline_seconds"),
             column("pipeline_own_seconds"));
  for (const std::string bare : {"bare", "paced"}) {
    const std::string label = bare == "bare" ? "back to back" : "paced as training";
    fmt::print("  bare c10d, {:<19}{:<36}{}\n", label, column(bare + "_seconds"),
               column(bare + "_own_seconds"));
    fmt::print("  ratio pipeline / {:<13}{:<36.3f}{:.3f} (median call {:.3f})\n",
               bare == "bare" ? "back to back" : "paced",
               median(bare + "_seconds") / median("pipeline_seconds"),
               median(bare + "_own_seconds") / median("pipeline_own_seconds"),
               median(bare + "_median_call_ratio"));
  }
  // Where a transfer travels while the process computes, it is blocked for less than the call.
  const std::string blocked =
      any.count(kind + ".blocked_seconds")
          ? fmt::format(", {:.1f} ms blocked in them",
                        1e3 * median("blocked_seconds") / static_cast<double>(steps))
          : std::string();
  fmt::print("  per step                      {:.0f} calls, {:.1f} ms in them (whole calls){}\n",
             calls / static_cast<double>(steps),
             1e3 * median("pipeline_seconds") / static_cast<double>(steps), blocked);
}

}  // namespace

int parallel_bench_command(const ExperimentSource& source, int64_t steps,
                           const std::vector<int64_t>& processes, int64_t rounds,
                           const std::vector<std::string>& versus) {
  // The experiment as given, and the --versus variant when there is one.
  struct Arm {
    std::string label;
    ExperimentSource source;
    Experiment experiment;
  };
  std::vector<Arm> arms{{"as given", source, timed_training_experiment(source, steps)}};
  if (!versus.empty()) {
    ExperimentSource variant = source;
    variant.overrides.insert(variant.overrides.end(), versus.begin(), versus.end());
    arms.push_back({fmt::format("{}", fmt::join(versus, ", ")), variant,
                    timed_training_experiment(variant, steps)});
  }
  for (const int64_t p : processes) {
    if (p < 2) {
      throw std::runtime_error(
          "bench-parallel: every -n must be at least 2 (each is compared with 1 process)");
    }
  }
  for (const Arm& arm : arms) {
    const Experiment& e = arm.experiment;
    for (const int64_t p : processes) {
      LaunchEnvironment launch;
      launch.launcher = "bench-parallel";
      launch.world_size = p;
      check_processes_fit(e, launch);
    }
    // The plugins are checked here, once, rather than in every child process.
    load_located_policy_set(e.policies, experiment_place(arm.source));
  }

  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / fmt::format("lrmoe-bench-parallel-{}", getpid());
  std::filesystem::create_directories(folder);
  // One process, then each P, each arm, `rounds` times: the same steps in fresh processes each
  // time, interleaved so that the machine's noise hits all alike; medians are reported.
  std::vector<int64_t> counts{1};
  counts.insert(counts.end(), processes.begin(), processes.end());
  std::map<std::pair<std::size_t, int64_t>, std::vector<Figures>> measured;  // (arm, P)
  for (int64_t round = 0; round < rounds; ++round)
    for (const int64_t p : counts)
      for (std::size_t a = 0; a < arms.size(); ++a)
        measured[{a, p}].push_back(measure(arms[a].source, steps, p, folder.string()));
  std::filesystem::remove_all(folder);

  auto median = [&](std::size_t a, int64_t p, const std::string& name) {
    std::vector<double> values;
    for (const Figures& round : measured.at({a, p})) values.push_back(round.at(name));
    return upper_median(values);
  };
  auto step_seconds = [&](std::size_t a, int64_t p) {
    return median(a, p, "step_seconds") / measured.at({a, p}).front().at("steps");
  };
  const double mib = 1 << 20;
  for (std::size_t a = 0; a < arms.size(); ++a) {
    const Experiment& e = arms[a].experiment;
    fmt::print(
        "\n{}experiment {} (model {}), {} ranks, expert state {}, {} timed steps after {} "
        "warm-up steps, median of {} rounds\n",
        arms.size() > 1 ? fmt::format("[{}] ", arms[a].label) : std::string(), e.experiment.name,
        e.model.preset, e.cluster.ranks,
        e.cluster.expert_state == ExpertState::Sharded ? "sharded" : "replicated", steps,
        kWarmupSteps, rounds);
    fmt::print("{:>9}  {:>8}  {:>7}  {:>9}  {:>17}  {:>17}  {:>24}\n", "processes", "step ms",
               "vs 1", a > 0 ? "vs given" : "", "peak MiB/process", "max RSS MiB",
               "held MiB: dense/experts");
    for (const int64_t p : counts) {
      const double peak = median(a, p, "measured_peak_bytes");
      const Figures& any = measured.at({a, p}).front();
      fmt::print(
          "{:>9}  {:>8.1f}  {:>7.3f}  {:>9}  {:>17}  {:>17.0f}  {:>24}\n", p,
          1e3 * step_seconds(a, p), step_seconds(a, p) / step_seconds(a, 1),
          a > 0 ? fmt::format("{:.3f}", step_seconds(a, p) / step_seconds(0, p)) : std::string(),
          peak < 0 ? std::string("-") : fmt::format("{:.0f}", peak / mib),
          median(a, p, "max_rss_bytes") / mib,
          fmt::format("{:.1f} / {:.1f}", any.at("dense_bytes") / mib,
                      any.at("expert_bytes") / mib));
    }
  }
  fmt::print(
      "                    (peak: the caching allocator's, largest process and timed step; "
      "held: parameters and gradients of process 0, optimizer state beside them; vs given: "
      "the variant's step time over the experiment's as given, same P)\n");
  for (std::size_t a = 0; a < arms.size(); ++a) {
    const std::string tag = arms.size() > 1 ? fmt::format("[{}] ", arms[a].label) : std::string();
    for (const int64_t p : processes) {
      print_transfers(tag + "all-to-all-v", "exchange", measured.at({a, p}), p, steps);
      print_transfers(tag + "expert transfers", "parameters", measured.at({a, p}), p, steps);
    }
  }
  return 0;
}

}  // namespace lrmoe
