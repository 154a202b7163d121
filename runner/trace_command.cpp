#include "runner/trace_command.hpp"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "core/config/experiment_loader.hpp"
#include "core/system/atomic_file.hpp"
#include "runner/database_option.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

using nlohmann::json;

// Microseconds, the trace format's unit.
double micros(const std::optional<std::string>& seconds) {
  return seconds ? 1e6 * std::stod(*seconds) : 0.0;
}

std::string text(const std::optional<std::string>& cell) {
  return cell.value_or("");
}

json metadata(const char* what, int64_t pid, std::optional<int64_t> tid, const std::string& name,
              int64_t sort_index) {
  json event = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid) event["tid"] = *tid;
  json sort = {{"ph", "M"},
               {"name", tid ? "thread_sort_index" : "process_sort_index"},
               {"pid", pid},
               {"args", {{"sort_index", sort_index}}}};
  if (tid) sort["tid"] = *tid;
  return json::array({event, sort});
}

// The track of a process's own spans, and of a logical rank's (above every process's own).
constexpr int64_t kProcessTrack = 0;
constexpr int64_t kFirstRankTrack = 1000;

}  // namespace

CLI::App* add_trace_command(CLI::App& app, TraceOptions& options) {
  CLI::App* command = app.add_subcommand(
      "trace",
      "write a recorded step's timeline (every process's and rank's spans, measured, and the "
      "cost model's beside them) as a Chrome trace file for Perfetto");
  command->add_option("run", options.run, "the run (its id)")->required();
  command->add_option("--step", options.step, "the step; train.trace_every says which have one")
      ->required();
  command->add_option("--out", options.out,
                      "the file to write; default trace-run<RUN>-step<N>.json");
  add_database_option(command, options.database, "results database");
  return command;
}

int trace_command(const TraceOptions& options, std::ostream& out) {
  const auto store = ResultsStore::open_read_only(options.database);
  const std::optional<RunSummary> run = store->find_run(options.run);
  if (!run) {
    throw std::invalid_argument(fmt::format("{}: has no run {}; lrmoe runs --db {} lists them",
                                            options.database, options.run, options.database));
  }
  const QueryResult spans = store->query(fmt::format(
      "SELECT process, rank, layer, phase, kind, start_seconds, seconds FROM trace_spans "
      "WHERE run = {} AND step = {} ORDER BY process, start_seconds",
      options.run, options.step));
  if (spans.rows.empty()) {
    const QueryResult steps = store->query(fmt::format(
        "SELECT group_concat(step, ', ') FROM (SELECT DISTINCT step FROM trace_spans WHERE run = "
        "{} ORDER BY step)",
        options.run));
    const std::string traced = steps.rows.empty() ? "" : text(steps.rows[0][0]);
    throw std::invalid_argument(fmt::format(
        "{}: run {} recorded no timeline of step {}; {} (train.trace_every sets which steps "
        "record one)",
        options.database, options.run, options.step,
        traced.empty() ? "it recorded none" : "it recorded steps " + traced));
  }
  const Experiment experiment =
      load_experiment_text(run->resolved_toml, fmt::format("run {}'s experiment", options.run));
  const int64_t processes = run->processes, ranks = run->ranks;
  const int64_t ranks_per_process = ranks / processes;

  json events = json::array();
  auto add_all = [&](const json& more) {
    for (const json& event : more) events.push_back(event);
  };
  for (int64_t p = 0; p < processes; ++p) {
    add_all(metadata("process_name", p, std::nullopt, fmt::format("process {} (measured)", p), p));
    add_all(metadata("thread_name", p, kProcessTrack, "step, MoE layers, plans", 0));
  }
  for (int64_t r = 0; r < ranks; ++r) {
    add_all(metadata("thread_name", r / ranks_per_process, kFirstRankTrack + r,
                     fmt::format("rank {} experts", r), kFirstRankTrack + r));
  }
  int64_t async_id = 0;
  for (const auto& row : spans.rows) {
    const int64_t process = std::stoll(text(row[0]));
    const std::string phase = text(row[3]), kind = text(row[4]);
    json args = {{"phase", phase}};
    std::string name = kind;
    if (row[2]) {
      args["layer"] = std::stoll(*row[2]);
      name = fmt::format("{} {} {}", kind == "layer" ? "MoE layer" : kind, *row[2], phase);
    }
    const double start = micros(row[5]), duration = micros(row[6]);
    if (kind == "all-to-all" || kind == "transfer") {
      // In flight from issue to arrival: they may overlap one another and the compute.
      json begin = {{"ph", "b"},      {"cat", kind},          {"name", name}, {"id", ++async_id},
                    {"pid", process}, {"tid", kProcessTrack}, {"ts", start},  {"args", args}};
      json end = begin;
      end["ph"] = "e";
      end["ts"] = start + duration;
      end.erase("args");
      events.push_back(begin);
      events.push_back(end);
      continue;
    }
    int64_t tid = kProcessTrack;
    if (row[1]) {
      tid = kFirstRankTrack + std::stoll(*row[1]);
      args["rank"] = std::stoll(*row[1]);
    }
    events.push_back({{"ph", "X"},
                      {"cat", kind},
                      {"name", name},
                      {"pid", process},
                      {"tid", tid},
                      {"ts", start},
                      {"dur", duration},
                      {"args", args}});
  }

  // The cost model's time of each MoE layer, laid end to end, by part: the compute, the
  // all-to-all not hidden behind it, the plan's collectives, the parameter transfers not hidden.
  const QueryResult modeled = store->query(fmt::format(
      "SELECT layer, modeled_seconds, modeled_compute_seconds, modeled_all_to_all_seconds, "
      "modeled_gather_seconds, modeled_replica_seconds, coalesce(modeled_overlapped_seconds, 0), "
      "coalesce(modeled_hidden_transfer_seconds, 0) "
      "FROM moe_layer_steps WHERE run = {} AND step = {} ORDER BY layer",
      options.run, options.step));
  const int64_t modeled_pid = processes;
  add_all(metadata("process_name", modeled_pid, std::nullopt,
                   fmt::format("modeled ({})", experiment.cluster.profile), processes));
  add_all(metadata("thread_name", modeled_pid, kProcessTrack, "MoE layers, end to end", 0));
  double at = 0;
  for (const auto& row : modeled.rows) {
    const std::string layer = text(row[0]);
    const double total = micros(row[1]);
    // Hidden behind compute: all-to-all behind chunks, parameter transfers behind the layers
    // around (Note [Overlapped expert fetch]).
    const double overlapped = micros(row[6]), hidden_transfers = micros(row[7]);
    events.push_back({{"ph", "X"},
                      {"cat", "modeled"},
                      {"name", "MoE layer " + layer},
                      {"pid", modeled_pid},
                      {"tid", kProcessTrack},
                      {"ts", at},
                      {"dur", total},
                      {"args",
                       {{"layer", std::stoll(layer)},
                        {"all-to-all us", micros(row[3])},
                        {"overlapped us", overlapped},
                        {"hidden transfers us", hidden_transfers}}}});
    const std::pair<const char*, double> parts[] = {
        {"compute", micros(row[2])},
        {"all-to-all (exposed)", micros(row[3]) - (overlapped - hidden_transfers)},
        {"plan collectives", micros(row[4])},
        {"parameter transfers (exposed)", micros(row[5]) - hidden_transfers}};
    double part_at = at;
    for (const auto& [part, duration] : parts) {
      events.push_back({{"ph", "X"},
                        {"cat", "modeled"},
                        {"name", part},
                        {"pid", modeled_pid},
                        {"tid", kProcessTrack},
                        {"ts", part_at},
                        {"dur", duration},
                        {"args", {{"layer", std::stoll(layer)}}}});
      part_at += duration;
    }
    at += total;
  }

  const json trace = {
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"run", options.run},
        {"step", options.step},
        {"database", store->path()},
        {"clock",
         "measured spans from each process's start of the step; modeled layers end to "
         "end from 0"}}},
      {"traceEvents", events}};
  const std::string file = options.out.empty()
                               ? fmt::format("trace-run{}-step{}.json", options.run, options.step)
                               : options.out;
  const std::string body = trace.dump(1);
  write_file_atomically(file, [&](const ByteSink& sink) { sink(body.data(), body.size()); });
  out << fmt::format(
      "wrote {}: run {} step {}, {} spans of {} processes and {} ranks, {} MoE "
      "layers modeled; open it in https://ui.perfetto.dev\n",
      file, options.run, options.step, spans.rows.size(), processes, ranks, modeled.rows.size());
  return 0;
}

}  // namespace lrmoe
