#pragma once
// `lrmoe trace RUN --step N [--out FILE] [--db PATH]`: one recorded step's timeline as a Chrome
// trace event file that Perfetto (ui.perfetto.dev) and chrome://tracing open (Note [Step trace]
// in docs/notes.md). Measured: per process, the step, each MoE layer's forward and backward and
// the plan inside them; per logical rank, its expert work; the all-to-all-v calls and expert
// transfers as asynchronous spans from issue to arrival. Modeled, beside them: each MoE layer's
// cost-model time under the run's hardware profile, by part.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <ostream>
#include <string>

namespace lrmoe {

struct TraceOptions {
  int64_t run = 0;
  int64_t step = 0;
  std::string out;  // empty: trace-run<RUN>-step<N>.json
  std::string database = "lrmoe.db";
};

// Registers `trace` and its options on `app`; main runs trace_command when it is parsed.
CLI::App* add_trace_command(CLI::App& app, TraceOptions& options);

// Writes the file and says where on `out`. Throws std::invalid_argument when the run or its
// timeline of the step is not there (naming the steps that have one).
int trace_command(const TraceOptions& options, std::ostream& out);

}  // namespace lrmoe
