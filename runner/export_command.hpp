#pragma once
// `lrmoe export (RUN... | --sweep NAME...) --format tensorboard|csv [--out DIR] [--db PATH]`:
// runs' recorded figures per step (runner/run_scalars.hpp) as files the ecosystem's tools read:
// TensorBoard event files (one folder per run, `tensorboard --logdir DIR` shows them side by
// side) or one CSV per run (a column per figure, a row per step); or their routing, each recorded
// step's pairs per MoE layer and expert, as the CSV `lrmoe replay --loads-csv` reads
// (core/replay/expert_load_csv.hpp).

#include <CLI/CLI.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace lrmoe {

struct ExportOptions {
  std::vector<int64_t> runs;
  std::vector<std::string> sweeps;  // the last run of each of their cells
  std::string database = "lrmoe.db";
  std::string format = "tensorboard";  // tensorboard | csv | expert-loads
  std::string out = "lrmoe-export";
};

// Registers `export` and its options on `app`; main runs export_command when it is parsed.
CLI::App* add_export_command(CLI::App& app, ExportOptions& options);

// Writes each run's files under options.out and names them on `out`. Throws
// std::invalid_argument (an unknown format, no runs) and StoreError (database, run, sweep).
int export_command(const ExportOptions& options, std::ostream& out);

}  // namespace lrmoe
