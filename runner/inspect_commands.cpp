#include "runner/inspect_commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/system/one_line.hpp"
#include "runner/interrupt.hpp"
#include "runner/query_result_text.hpp"
#include "runner/sparkline.hpp"
#include "runner/text_table.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

constexpr size_t kSparklineWidth = 60;

std::optional<std::string> loss_text(const std::optional<double>& loss) {
  if (!loss) return std::nullopt;
  return fmt::format("{:.4f}", *loss);
}

std::string seconds_text(double seconds) {
  return fmt::format("{:.1f}", seconds);
}

// '2024-05-01T12:00:03.123Z' as '2024-05-01 12:00:03': seconds are precise enough to read.
std::string readable_time(std::string iso_utc) {
  std::replace(iso_utc.begin(), iso_utc.end(), 'T', ' ');
  return iso_utc.substr(0, iso_utc.find('.'));
}

// 12345678 as "12,345,678".
std::string with_thousands(int64_t value) {
  std::string digits = std::to_string(value);
  const size_t first_digit = value < 0 ? 1 : 0;
  for (size_t i = digits.size(); i > first_digit + 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

QueryResult runs_table(const std::vector<RunSummary>& runs) {
  QueryResult table;
  table.columns = {"id",
                   "name",
                   "model",
                   "sweep cell",
                   "policies",
                   "ranks",
                   "kind",
                   "status",
                   "started (UTC)",
                   "steps",
                   "train loss",
                   "eval loss",
                   "target",
                   "target step",
                   "target time s",
                   "target MoE s",
                   "target MoE critical s",
                   "target modeled MoE s"};
  for (const RunSummary& run : runs) {
    const auto& ttt = run.time_to_target;
    table.rows.push_back({
        std::to_string(run.id),
        run.name,
        run.model,
        run.sweep ? std::optional(fmt::format("{} {}", *run.sweep, *run.cell)) : std::nullopt,
        run.policies,
        std::to_string(run.ranks),
        std::string(run.replay ? "replay" : "train"),
        run.status,
        readable_time(run.started_at),
        std::to_string(run.steps),
        loss_text(run.final_train_loss),
        loss_text(run.final_eval_loss),
        loss_text(run.target_loss),
        ttt ? std::optional(std::to_string(ttt->step)) : std::nullopt,
        ttt ? std::optional(seconds_text(ttt->step_seconds)) : std::nullopt,
        ttt ? std::optional(seconds_text(ttt->moe_seconds)) : std::nullopt,
        // Runs recorded before schema 5 have no critical path.
        ttt && std::isfinite(ttt->moe_critical_seconds)
            ? std::optional(seconds_text(ttt->moe_critical_seconds))
            : std::nullopt,
        ttt && std::isfinite(ttt->moe_modeled_seconds)
            ? std::optional(fmt::format("{:.4f}", ttt->moe_modeled_seconds))
            : std::nullopt,
    });
  }
  return table;
}

// "▇▆▄▃▂▁  min 2.3100  max 7.8000", or "-" for a series with no finite value.
std::string curve_text(const std::vector<double>& values) {
  std::vector<double> finite;
  std::copy_if(values.begin(), values.end(), std::back_inserter(finite),
               [](double v) { return std::isfinite(v); });
  if (finite.empty()) return "-";
  const auto [low, high] = std::minmax_element(finite.begin(), finite.end());
  return fmt::format("{}  min {:.4f}  max {:.4f}", sparkline(values, kSparklineWidth), *low, *high);
}

std::string_view dash_if_empty(std::string_view text) {
  return text.empty() ? "-" : text;
}

void print_field(std::ostream& out, std::string_view label, std::string_view value) {
  out << fmt::format("  {:<16}{}\n", label, dash_if_empty(value));
}

void print_run(std::ostream& out, const RunSummary& run, const std::vector<StepRecord>& steps,
               const std::optional<std::string>& failure) {
  std::vector<double> train_losses, eval_losses;
  for (const StepRecord& step : steps) {
    train_losses.push_back(step.train_loss);
    if (step.eval_loss) eval_losses.push_back(*step.eval_loss);
  }
  const auto or_dash = [](const std::optional<std::string>& text) { return text.value_or("-"); };

  out << fmt::format("run {}: {}\n", run.id, run.name);
  print_field(out, "model", run.model);
  if (run.sweep) print_field(out, "sweep cell", fmt::format("{} {}", *run.sweep, *run.cell));
  print_field(out, "status", run.status);
  if (failure) print_field(out, "why", *failure);
  if (run.replay) print_field(out, "replay of", run.load_source);
  print_field(out, "started", readable_time(run.started_at) + " UTC");
  print_field(out, "ended", run.ended_at ? readable_time(*run.ended_at) + " UTC" : "-");
  print_field(out, "host", run.host);
  print_field(out, "code version", run.code_version);
  print_field(out, "torch / BLAS",
              fmt::format("{} / {}", dash_if_empty(run.torch_version), dash_if_empty(run.blas)));
  print_field(out, "seed", std::to_string(run.seed));
  print_field(out, "policies",
              fmt::format("{} on {} ranks{}", dash_if_empty(run.policies), run.ranks,
                          run.processes > 1 ? fmt::format(" in {} processes", run.processes)
                                            : std::string()));
  print_field(out, "parameters",
              fmt::format("{} total, {} active", with_thousands(run.params_total),
                          with_thousands(run.params_active)));
  print_field(out, "TOML sha256", run.toml_sha256);
  print_field(out, "target loss", or_dash(loss_text(run.target_loss)));
  const auto& ttt = run.time_to_target;
  print_field(out, "time to target",
              run.replay ? "- (a replay plans without training)"
              : ttt      ? fmt::format("step {}, {} s, {} s of it in MoE layers{}{}", ttt->step,
                                       seconds_text(ttt->step_seconds), seconds_text(ttt->moe_seconds),
                                       // Runs recorded before schema 5 have no critical path, before the
                                       // cost model no modeled time.
                                  std::isfinite(ttt->moe_critical_seconds)
                                           ? fmt::format(", {} s critical path",
                                                         seconds_text(ttt->moe_critical_seconds))
                                           : "",
                                  std::isfinite(ttt->moe_modeled_seconds)
                                           ? fmt::format(" ({:.4f} s modeled)", ttt->moe_modeled_seconds)
                                           : "")
                         : "not reached");
  print_field(out, "steps", with_thousands(run.steps));
  print_field(out, "final train", or_dash(loss_text(run.final_train_loss)));
  print_field(out, "final eval", or_dash(loss_text(run.final_eval_loss)));
  print_field(out, "train loss", curve_text(train_losses));
  print_field(out, "eval loss", curve_text(eval_losses));
}

}  // namespace

// The columns of runs_table the narrow listing keeps, and the width it cuts cells at: 120
// columns with a name of 28 characters.
const std::vector<std::string> kNarrowRunColumns = {
    "id",        "name",   "status",      "started (UTC)", "steps",
    "eval loss", "target", "target step", "target MoE s"};
constexpr int kNarrowCellWidth = 28;

QueryResult narrow(const QueryResult& table) {
  std::vector<std::size_t> keep;
  for (const std::string& column : kNarrowRunColumns)
    keep.push_back(static_cast<std::size_t>(
        std::find(table.columns.begin(), table.columns.end(), column) - table.columns.begin()));
  QueryResult out;
  for (std::size_t c : keep) out.columns.push_back(table.columns[c]);
  for (const auto& row : table.rows) {
    out.rows.emplace_back();
    for (std::size_t c : keep) out.rows.back().push_back(row[c]);
  }
  return out;
}

int run_runs_command(const std::string& db_path, const RunFilter& filter, std::ostream& out,
                     bool wide) {
  const std::vector<std::string> statuses = {"running", "finished", "failed", "stopped",
                                             "interrupted"};
  if (filter.status &&
      std::find(statuses.begin(), statuses.end(), *filter.status) == statuses.end())
    throw std::invalid_argument(
        fmt::format("runs: --status {}: use one of {}", *filter.status, fmt::join(statuses, ", ")));
  const auto store = ResultsStore::open_read_only(db_path);
  std::vector<RunSummary> runs = store->list_runs();
  const std::size_t all = runs.size();
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [&](const RunSummary& run) {
                              return (filter.status && run.status != *filter.status) ||
                                     (filter.sweep && run.sweep != filter.sweep) ||
                                     (filter.model && run.model != *filter.model);
                            }),
             runs.end());
  if (filter.last && static_cast<int64_t>(runs.size()) > *filter.last)
    runs.erase(runs.begin(), runs.end() - *filter.last);
  if (runs.empty()) {
    out << (all == 0 ? fmt::format("no runs in {}\n", db_path)
                     : fmt::format("none of the {} runs in {} passes the filters\n", all, db_path));
    return 0;
  }
  out << (wide ? render_text_table(runs_table(runs), 40, "-")
               : render_text_table(narrow(runs_table(runs)), kNarrowCellWidth, "-"));
  return 0;
}

int run_show_command(const std::string& db_path, int64_t run_id, std::ostream& out) {
  const auto store = ResultsStore::open_read_only(db_path);
  const std::optional<RunSummary> run = store->find_run(run_id);
  if (!run) {
    std::cerr << fmt::format("lrmoe: no run {} in {}; `lrmoe runs --db {}` lists them\n", run_id,
                             db_path, db_path);
    return 1;
  }
  // A failed run says why: the last error it recorded (the line the run printed when it stopped).
  std::optional<std::string> failure;
  if (run->status == "failed") {
    const QueryResult last = store->query(fmt::format(
        "SELECT message FROM events WHERE run = {} AND level = 'error' ORDER BY id DESC LIMIT 1",
        run_id));
    if (!last.rows.empty() && last.rows.front().front()) failure = *last.rows.front().front();
  }
  print_run(out, *run, store->steps(run_id), failure);
  return 0;
}

int run_query_command(const std::string& db_path, const std::string& sql, const QueryOutput& output,
                      std::ostream& out) {
  if (output.format != "table" && output.format != "csv" && output.format != "json") {
    throw std::invalid_argument(
        fmt::format("query: --format {}: use table, csv or json", output.format));
  }
  const auto store = ResultsStore::open_read_only(db_path);
  // Ctrl-C or SIGTERM stops the statement where it is, saying so in its one line and exiting as
  // the signal's (130, 143); time and memory are bounded.
  install_interrupt_handler(nullptr);
  QueryResult result;
  try {
    result = store->query(
        sql, {output.timeout_seconds, output.max_memory_mib << 20, &interrupt_requested});
  } catch (const StoreError& error) {
    if (!interrupt_requested()) throw;
    fmt::print(stderr, "lrmoe: {}\n", one_line(error.what()));
    return 128 + interrupt_signal();
  }
  if (output.format == "csv") {
    out << render_csv(result);
  } else if (output.format == "json") {
    out << render_json(result);
  } else {
    out << render_text_table(result, output.max_width == 0 ? std::string::npos : output.max_width);
    out << fmt::format("({} {})\n", result.rows.size(), result.rows.size() == 1 ? "row" : "rows");
  }
  return 0;
}

}  // namespace lrmoe
