#include "runner/run_scalars.hpp"

#include <fmt/format.h>

#include <ctime>
#include <map>
#include <stdexcept>

namespace lrmoe {
namespace {

// "2026-12-05T00:35:18.935Z" as Unix seconds.
double unix_seconds(const std::string& iso_utc) {
  std::tm parts{};
  double seconds = 0;
  if (std::sscanf(iso_utc.c_str(), "%d-%d-%dT%d:%d:%lf", &parts.tm_year, &parts.tm_mon,
                  &parts.tm_mday, &parts.tm_hour, &parts.tm_min, &seconds) != 6)
    return 0;
  parts.tm_year -= 1900;
  parts.tm_mon -= 1;
  return static_cast<double>(timegm(&parts)) + seconds;
}

// The series of one SQL answer's columns past the first, which holds the step.
void add_query_series(const QueryResult& answer, const std::vector<std::string>& tags,
                      std::vector<ScalarSeries>& series) {
  for (std::size_t c = 0; c < tags.size(); ++c) {
    ScalarSeries s{tags[c], {}};
    for (const auto& row : answer.rows) {
      if (row[0] && row[c + 1]) s.points.emplace_back(std::stoll(*row[0]), std::stod(*row[c + 1]));
    }
    if (!s.points.empty()) series.push_back(std::move(s));
  }
}

}  // namespace

RunScalars read_run_scalars(const ResultsStore& store, int64_t run) {
  const std::optional<RunSummary> summary = store.find_run(run);
  if (!summary)
    throw std::invalid_argument(
        fmt::format("export: no run {} in {}; lrmoe runs lists them", run, store.path()));
  RunScalars scalars;
  scalars.run = *summary;
  ScalarSeries train{"loss/train", {}}, eval{"loss/eval", {}}, lr{"optimizer/lr", {}},
      grad{"optimizer/grad_norm", {}}, step_time{"time/step_seconds", {}},
      moe_time{"time/moe_seconds", {}}, modeled{"time/moe_modeled_seconds", {}},
      throughput{"throughput/tokens_per_second", {}};
  double wall = unix_seconds(summary->started_at);
  for (const StepRecord& s : store.steps(run)) {
    wall += s.step_seconds;
    scalars.steps.push_back(s.step);
    scalars.wall_times.push_back(wall);
    train.points.emplace_back(s.step, s.train_loss);
    if (s.eval_loss) eval.points.emplace_back(s.step, *s.eval_loss);
    lr.points.emplace_back(s.step, s.lr);
    grad.points.emplace_back(s.step, s.grad_norm);
    step_time.points.emplace_back(s.step, s.step_seconds);
    moe_time.points.emplace_back(s.step, s.moe_seconds);
    // Steps recorded before the cost model read back as NaN: no point.
    if (s.moe_modeled_seconds == s.moe_modeled_seconds)
      modeled.points.emplace_back(s.step, s.moe_modeled_seconds);
    if (s.step_seconds > 0)
      throughput.points.emplace_back(s.step, static_cast<double>(s.tokens) / s.step_seconds);
  }
  for (ScalarSeries* s : {&train, &eval, &lr, &grad, &step_time, &moe_time, &modeled, &throughput})
    if (!s->points.empty()) scalars.series.push_back(std::move(*s));

  // Over the MoE layers of each step; runs without the pipeline have none.
  add_query_series(
      store.query(fmt::format(
          "SELECT step, CAST(sum(pairs_dropped) AS REAL) / nullif(sum(pairs_routed), 0), "
          "CAST(sum(pairs_kept) AS REAL) / nullif(sum(pairs_routed), 0), avg(replicas) "
          "FROM moe_layer_steps WHERE run = {} GROUP BY step ORDER BY step",
          run)),
      {"pairs/dropped_forward_fraction", "pairs/kept_backward_fraction", "moe/replicas_per_layer"},
      scalars.series);
  add_query_series(
      store.query(fmt::format(
          "SELECT step, max(coalesce(peak_subtotal, owned + replicas + forward_tokens + "
          "backward_tokens)) / 1048576.0 FROM rank_memory WHERE run = {} GROUP BY step "
          "ORDER BY step",
          run)),
      {"memory/peak_subtotal_mib"}, scalars.series);
  return scalars;
}

}  // namespace lrmoe
