// lrmoe: the command-line program. Subcommands train experiments, inspect them and the results
// database. Every user error ends in one line "lrmoe: <place>: <what to do>" and exit code 1; a
// command line that does not parse ends in "lrmoe: usage: ..." and exit code 2.

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <string_view>

#include <cstdlib>
#include <iostream>

#include "bench_command.hpp"
#include "compare_command.hpp"
#include "core/config/experiment_loader.hpp"
#include "core/device/caching_host_allocator.hpp"
#include "core/system/host_info.hpp"
#include "core/system/one_line.hpp"
#include "count_option.hpp"
#include "database_option.hpp"
#include "experiment_options.hpp"
#include "export_command.hpp"
#include "export_hf_command.hpp"
#include "gate_command.hpp"
#include "hf_compute_command.hpp"
#include "inspect_commands.hpp"
#include "launch_command.hpp"
#include "named_runs.hpp"
#include "parallel_bench_command.hpp"
#include "pipeline_bench_command.hpp"
#include "planning_bench_command.hpp"
#include "plugin_failure_record_command.hpp"
#include "plugins_command.hpp"
#include "positive_control_command.hpp"
#include "project_command.hpp"
#include "replay_command.hpp"
#include "resume_command.hpp"
#include "run_command.hpp"
#include "sweep_command.hpp"
#include "trace_command.hpp"

namespace {

constexpr int kUsageExit = 2;

using lrmoe::add_experiment_options;
using lrmoe::repeatable;

// "lrmoe run": the deepest subcommand the command line reached, for the usage hint.
std::string command_path(const CLI::App& app) {
  std::string path = "lrmoe";
  for (const CLI::App* command = &app; !command->get_subcommands().empty();) {
    command = command->get_subcommands().front();
    path += " " + command->get_name();
  }
  return path;
}

// LibTorch's own log lines (c10d's connection retries and timeouts, its process groups'
// start-up) would come before lrmoe's one error line and say less: every failure they log also
// reaches lrmoe as an exception, which names it with what to do. Only fatal ones are kept;
// TORCH_CPP_LOG_LEVEL=INFO (or WARNING, ERROR) set by the user wins, for debugging c10d.
void quiet_libtorch_logging() {
  setenv("TORCH_CPP_LOG_LEVEL", "FATAL", /*overwrite=*/0);
  c10::initLogging();
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) would kill the process mid-write with SIGXFSZ and no message;
  // ignored, the write fails with EFBIG and ends as every failed write does, in one line.
  std::signal(SIGXFSZ, SIG_IGN);
  quiet_libtorch_logging();
  // Large host tensors reused instead of unmapped and faulted in again every step (Note [Host
  // memory reuse] in docs/notes.md).
  lrmoe::install_caching_host_allocator();
  CLI::App app{"lrmoe: memory-aware Mixture-of-Experts training harness"};
  app.require_subcommand(1);
  // `lrmoe --version`: the version and the commit it was built from, as every run records it.
  app.set_version_flag("--version", lrmoe::code_version());

  spdlog::set_pattern("[%H:%M:%S %^%l%$] %v");

  lrmoe::ExperimentSource source;
  std::string db = "lrmoe.db";
  int64_t run_id = 0;
  std::string sql;

  auto* run = app.add_subcommand(
      "run", "train an experiment (no file: the built-in default) and record it");
  add_experiment_options(run, source, false);
  lrmoe::add_database_option(run, source.database, "results database (overrides store.path)");
  // Which sweep cell a run is: given by `lrmoe sweep` to the runs it starts; not for users.
  std::string sweep_cell;
  run->add_option("--sweep-cell", sweep_cell)->group("");
  // The run and checkpoint a run resumes: given by `lrmoe resume`; not for users.
  int64_t resume_run = 0;
  std::string resume_checkpoint;
  run->add_option("--resume-run", resume_run)->group("");
  run->add_option("--resume-checkpoint", resume_checkpoint)->group("");
  bool resume_other_build = false;
  run->add_flag("--resume-other-build", resume_other_build)->group("");

  auto* launch = app.add_subcommand("launch",
                                    "train an experiment on N local processes over loopback "
                                    "(c10d), each hosting ranks/N logical ranks");
  add_experiment_options(launch, source, false);
  lrmoe::add_database_option(launch, source.database, "results database (overrides store.path)");
  launch->add_option("--sweep-cell", sweep_cell)->group("");
  launch->add_option("--resume-run", resume_run)->group("");
  launch->add_option("--resume-checkpoint", resume_checkpoint)->group("");
  launch->add_flag("--resume-other-build", resume_other_build)->group("");
  int64_t processes = 2;
  launch
      ->add_option("-n,--processes", processes,
                   "processes to start (must divide cluster.ranks and batch_size)")
      ->check(lrmoe::count_between(1));

  auto* validate =
      app.add_subcommand("validate", "parse and resolve an experiment, print it, do not train");
  add_experiment_options(validate, source, false);

  auto* bench =
      app.add_subcommand("bench", "measure tokens/s, MoE-layer share and grouped-GEMM efficiency");
  add_experiment_options(bench, source, false);
  int64_t bench_steps = 20;
  bench->add_option("--steps", bench_steps, "training steps to time")
      ->check(lrmoe::count_between(1));

  auto* bench_pipeline = app.add_subcommand("bench-pipeline",
                                            "time one MoE layer's forward+backward under variants "
                                            "of its policies (default: 100%, 50% and "
                                            "25% backward quotas)");
  lrmoe::PipelineBenchOptions pipeline_bench;
  bench_pipeline->add_option("--tokens", pipeline_bench.tokens, "tokens per pass")
      ->check(lrmoe::count_between(1));
  bench_pipeline->add_option("--hidden", pipeline_bench.hidden, "hidden size")
      ->check(lrmoe::count_between(1));
  bench_pipeline->add_option("--expert-ffn", pipeline_bench.expert_ffn, "expert FFN size")
      ->check(lrmoe::count_between(1));
  bench_pipeline->add_option("--experts", pipeline_bench.experts, "routed experts")
      ->check(lrmoe::count_between(1));
  bench_pipeline->add_option("--top-k", pipeline_bench.top_k, "experts per token")
      ->check(lrmoe::count_between(1));
  bench_pipeline->add_option("--ranks", pipeline_bench.ranks, "logical ranks (must divide experts)")
      ->check(lrmoe::count_between(1));
  bench_pipeline->add_option("--rounds", pipeline_bench.rounds, "timed rounds per variant")
      ->check(lrmoe::count_between(1));
  repeatable(
      bench_pipeline->add_option("--set", pipeline_bench.overrides,
                                 "override section.key=value for every variant (repeatable)"));
  bench_pipeline
      ->add_option("--vary", pipeline_bench.vary, "section.key=v1,v2,...: one variant per value")
      ->capture_default_str();

  auto* bench_parallel = app.add_subcommand(
      "bench-parallel",
      "all-to-all-v bus bandwidth of the pipeline vs bare c10d, and step time on N processes vs 1");
  add_experiment_options(bench_parallel, source, false);
  int64_t parallel_steps = 20;
  bench_parallel->add_option("--steps", parallel_steps, "training steps to time")
      ->check(lrmoe::count_between(1));
  std::vector<int64_t> parallel_processes{2};
  bench_parallel
      ->add_option("-n,--processes", parallel_processes,
                   "process counts to compare with one (e.g. 2,4)")
      ->delimiter(',')
      ->check(lrmoe::count_between(1));
  int64_t parallel_rounds = 3;
  bench_parallel
      ->add_option("--rounds", parallel_rounds,
                   "interleaved rounds of 1 and each N processes (medians)")
      ->check(lrmoe::count_between(1));
  std::vector<std::string> parallel_versus;
  repeatable(bench_parallel->add_option(
      "--versus", parallel_versus,
      "section.key=value: a second variant, measured in the same rounds (repeatable: one "
      "variant of several settings)"));
  // What each process of bench-parallel runs; not for users.
  auto* parallel_worker = app.add_subcommand("bench-parallel-worker", "")->group("");
  add_experiment_options(parallel_worker, source, false);
  parallel_worker->add_option("--steps", parallel_steps)->required();
  std::string parallel_result;
  parallel_worker->add_option("--result", parallel_result)->required();

  auto* sweep = app.add_subcommand(
      "sweep",
      "run every cell of a sweep file (base experiment and axes) as one run each, "
      "resumable");
  lrmoe::SweepOptions sweep_options;
  sweep->add_option("sweep", sweep_options.file, "sweep TOML file")->required();
  lrmoe::add_database_option(sweep, sweep_options.database,
                             "results database (default: the base experiment's store.path)");
  sweep->add_option("-j,--jobs", sweep_options.jobs, "cells to run at once (cores split evenly)")
      ->check(lrmoe::count_between(1));
  sweep->add_flag("--retry-failed", sweep_options.retry_failed,
                  "run again the cells whose last run failed");

  lrmoe::GateOptions gate_options;
  CLI::App* gate = lrmoe::add_gate_command(app, gate_options);
  lrmoe::PositiveControlOptions control_options;
  CLI::App* control = lrmoe::add_positive_control_command(app, control_options);

  lrmoe::ProjectOptions project_options;
  CLI::App* project = lrmoe::add_project_command(app, project_options);

  auto* compare =
      app.add_subcommand("compare",
                         "per model and policy variant over seeds: time to target, memory, pairs; "
                         "reductions against a baseline");
  lrmoe::CompareOptions compare_options;
  lrmoe::add_named_runs_options(compare, compare_options.runs, compare_options.sweeps);
  lrmoe::add_database_option(compare, compare_options.database, "results database");
  compare->add_option("--baseline", compare_options.baseline,
                      "the variant to compare against, as the table names it");
  compare->add_option("--format", compare_options.format, "table, csv, json or markdown");
  compare
      ->add_option("--columns", compare_options.columns,
                   "the figures the table and Markdown show, comma-separated (default: time to "
                   "target, memory and pairs); also steps, replicas, forward_imbalance and the "
                   "rest of the CSV's figure names")
      ->delimiter(',');
  auto* compare_plot =
      compare->add_option("--plot", compare_options.plot_dir,
                          "write PNG and SVG figures into this folder (matplotlib)");
  compare
      ->add_option("--x", compare_options.plot_x,
                   "the loss figure's x axis: steps, critical (MoE time on the critical path, "
                   "measured), modeled or projected (at full size, lrmoe project)")
      ->capture_default_str()
      ->needs(compare_plot);

  lrmoe::ExportOptions export_options;
  CLI::App* export_runs = lrmoe::add_export_command(app, export_options);
  lrmoe::TraceOptions trace_options;
  CLI::App* trace = lrmoe::add_trace_command(app, trace_options);
  lrmoe::ExportHfOptions export_hf_options;
  CLI::App* export_hf = lrmoe::add_export_hf_command(app, export_hf_options);
  lrmoe::HfComputeOptions hf_compute_options;
  CLI::App* hf_compute = lrmoe::add_hf_compute_command(app, hf_compute_options);

  lrmoe::ReplayOptions replay_options;
  CLI::App* replay = lrmoe::add_replay_command(app, replay_options);

  auto* bench_planning = app.add_subcommand(
      "bench-planning",
      "what agreeing on a plan costs per rank as ranks and batch grow, exact against scalable "
      "planning, modeled at the experiment's model dimensions without training");
  lrmoe::PlanningBenchOptions planning_bench;
  add_experiment_options(bench_planning, planning_bench.source, true);
  bench_planning->add_option("--ranks", planning_bench.ranks, "rank counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  bench_planning
      ->add_option("--tokens-per-rank", planning_bench.tokens_per_rank,
                   "tokens per rank and pass, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  bench_planning
      ->add_option("--skew", planning_bench.skew,
                   "synthetic routing: zipf:S, expert shares proportional to 1/rank^S")
      ->capture_default_str();

  auto* resume = app.add_subcommand(
      "resume", "continue a stopped, interrupted or failed run from its newest checkpoint");
  int64_t resume_id = 0;
  resume->add_option("run", resume_id, "run id")->required()->check(lrmoe::count_between(1));
  lrmoe::ResumeOptions resume_options;
  resume->add_flag("--allow-changed-plugins", resume_options.allow_changed_plugins,
                   "resume even where a plugin library's SHA-256 differs from the recorded one "
                   "(each recorded as a warning event of the run)");
  resume->add_flag("--allow-changed-code", resume_options.allow_changed_code,
                   "resume with a build of lrmoe other than the one that trained the run "
                   "(recorded as a warning event of the run)");
  lrmoe::add_database_option(resume, db, "results database");

  auto* runs = app.add_subcommand("runs", "list the runs in the results database");
  lrmoe::add_database_option(runs, db, "results database");
  lrmoe::RunFilter run_filter;
  runs->add_option("--status", run_filter.status,
                   "only runs of this status: running, finished, failed, stopped, interrupted");
  runs->add_option("--sweep", run_filter.sweep, "only the runs of this sweep's cells");
  runs->add_option("--model", run_filter.model, "only the runs of this model, by name");
  runs->add_option("--last", run_filter.last, "only the newest N (of those the filters keep)")
      ->check(lrmoe::count_between(1));
  bool runs_wide = false;
  runs->add_flag("--wide", runs_wide,
                 "every column (model, sweep cell, policies, ranks, kind, training loss, all times "
                 "to target), not only those that fit 120 columns");

  auto* show = app.add_subcommand("show", "summary and loss curve of one run");
  show->add_option("run", run_id, "run id")->required()->check(lrmoe::count_between(1));
  lrmoe::add_database_option(show, db, "results database");

  auto* query =
      app.add_subcommand("query", "run one read-only SQL statement on the results database");
  query->add_option("sql", sql, "SQL statement")->required();
  lrmoe::QueryOutput query_output;
  query
      ->add_option("--format", query_output.format,
                   "table (cells cut to --max-width), csv or json (every cell in full)")
      ->capture_default_str();
  query
      ->add_option("--max-width", query_output.max_width,
                   "table: characters a cell shows before it is cut (0: never cut)")
      ->capture_default_str();
  query
      ->add_option("--timeout", query_output.timeout_seconds,
                   "seconds the statement may run before it is stopped (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  query
      ->add_option("--max-memory", query_output.max_memory_mib,
                   "MiB that SQLite and the answer may take (0: no limit)")
      ->capture_default_str()
      ->check(lrmoe::count_between(0, int64_t{1} << 30));
  lrmoe::add_database_option(query, db, "results database");

  auto* plugins = app.add_subcommand(
      "plugins", "list the policy plugins found, with their parameters and defaults");
  std::vector<std::string> plugin_folders;
  repeatable(plugins->add_option("--path", plugin_folders,
                                 "another plugin folder to search (repeatable)"));
  std::optional<std::string> plugin_kind;
  plugins->add_option("--kind", plugin_kind,
                      "only the plugins of this kind: placement, metric, selection or routing");

  lrmoe::PluginFailureRecord failure_record;
  CLI::App* record_failure = lrmoe::add_record_plugin_failure_command(app, failure_record);

  app.add_subcommand("schema",
                     "print the experiment schema: every section, key, default and range");

  // `lrmoe help` as `lrmoe --help`, the word users type first.
  if (argc == 2 && std::string_view(argv[1]) == "help") {
    app.name("lrmoe");
    fmt::print("{}", app.help());
    return 0;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& help) {
    return app.exit(help);  // --help: printed, exit 0
  } catch (const CLI::ParseError& error) {
    fmt::print(stderr, "lrmoe: usage: {}; `{} --help` lists the arguments\n",
               lrmoe::one_line(error.what()), command_path(app));
    return kUsageExit;
  }

  try {
    if (!sweep_cell.empty()) source.sweep_cell = lrmoe::parse_sweep_cell(sweep_cell);
    if (!resume_checkpoint.empty())
      source.resume = lrmoe::ResumePoint{resume_run, resume_checkpoint, resume_other_build};
    if (run->parsed()) return lrmoe::run_command(source);
    if (launch->parsed()) return lrmoe::launch_command(source, processes);
    if (validate->parsed()) return lrmoe::validate_command(source);
    if (bench->parsed()) return lrmoe::bench_command(source, bench_steps);
    if (bench_pipeline->parsed()) return lrmoe::pipeline_bench_command(pipeline_bench);
    if (bench_parallel->parsed())
      return lrmoe::parallel_bench_command(source, parallel_steps, parallel_processes,
                                           parallel_rounds, parallel_versus);
    if (parallel_worker->parsed())
      return lrmoe::parallel_bench_worker(source, parallel_steps, parallel_result);
    if (sweep->parsed()) return lrmoe::sweep_command(sweep_options);
    if (compare->parsed()) return lrmoe::compare_command(compare_options, std::cout, std::cerr);
    if (gate->parsed()) return lrmoe::gate_command(gate_options, std::cout);
    if (control->parsed()) return lrmoe::positive_control_command(control_options, std::cout);
    if (project->parsed()) return lrmoe::project_command(project_options, std::cout);
    if (replay->parsed()) return lrmoe::replay_command(replay_options, std::cout);
    if (bench_planning->parsed()) return lrmoe::planning_bench_command(planning_bench, std::cout);
    if (resume->parsed()) return lrmoe::resume_command(resume_id, db, resume_options);
    if (runs->parsed()) return lrmoe::run_runs_command(db, run_filter, std::cout, runs_wide);
    if (show->parsed()) return lrmoe::run_show_command(db, run_id);
    if (query->parsed()) return lrmoe::run_query_command(db, sql, query_output);
    if (plugins->parsed()) return lrmoe::plugins_command(plugin_folders, plugin_kind);
    if (export_runs->parsed()) return lrmoe::export_command(export_options, std::cout);
    if (export_hf->parsed()) return lrmoe::export_hf_command(export_hf_options, std::cout);
    if (trace->parsed()) return lrmoe::trace_command(trace_options, std::cout);
    if (hf_compute->parsed()) return lrmoe::hf_compute_command(hf_compute_options);
    if (record_failure->parsed()) return lrmoe::record_plugin_failure_command(failure_record);
    std::cout << lrmoe::schema_markdown();
    return 0;
  } catch (const c10::Error& error) {
    // LibTorch's own errors carry a C++ backtrace that says nothing to a user.
    std::cout.flush();
    fmt::print(stderr, "lrmoe: {}\n", lrmoe::one_line(error.what_without_backtrace()));
    return 1;
  } catch (const std::exception& error) {
    std::cout.flush();
    fmt::print(stderr, "lrmoe: {}\n", lrmoe::one_line(error.what()));
    return 1;
  }
}
