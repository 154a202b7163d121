#include "store/run_reader.hpp"

#include <fmt/format.h>

namespace lrmoe::store {
namespace {

RunSummary summary_from_row(const sqlite::Statement& row) {
  RunSummary run;
  run.id = row.column_int64(0);
  run.name = row.column_text(1);
  run.status = row.column_text(2);
  run.started_at = row.column_text(3);
  run.ended_at = row.column_optional_text(4);
  run.resolved_toml = row.column_text(5);
  run.toml_sha256 = row.column_text(6);
  run.code_version = row.column_text(7);
  run.host = row.column_text(8);
  run.torch_version = row.column_text(9);
  run.blas = row.column_text(10);
  run.seed = static_cast<uint64_t>(row.column_int64(11));
  run.params_total = row.column_int64(12);
  run.params_active = row.column_int64(13);
  run.ranks = row.column_int64(14);
  run.policies = row.column_text(15);
  run.target_loss = row.column_optional_double(16);
  if (const auto step = row.column_optional_int64(17)) {
    run.time_to_target = TimeToTarget{*step, row.column_double(18), row.column_double(19),
                                      row.column_double(20), row.column_double(25)};
  }
  run.steps = row.column_int64(21);
  run.final_train_loss = row.column_optional_double(22);
  run.final_eval_loss = row.column_optional_double(23);
  run.processes = row.column_int64(24);
  run.replay = row.column_text(26) == "replay";
  run.load_source = row.column_optional_text(27).value_or("");
  run.model = row.column_optional_text(28).value_or("");
  run.sweep = row.column_optional_text(29);
  run.cell = row.column_optional_int64(30);
  return run;
}

}  // namespace

std::vector<RunSummary> read_run_summaries(const sqlite::Database& db, std::optional<int64_t> run) {
  sqlite::Statement select = db.prepare(
      "SELECT r.id, r.name, r.status, r.started_at, r.ended_at, r.resolved_toml, r.toml_sha256, "
      "       r.code_version, r.host, r.torch_version, r.blas, r.seed, r.params_total, "
      "       r.params_active, r.ranks, r.policies, r.target_loss, r.ttt_step, "
      "       r.ttt_step_seconds, r.ttt_moe_seconds, r.ttt_moe_modeled_seconds, s.steps, "
      "       s.final_train_loss, s.final_eval_loss, r.processes, r.ttt_moe_critical_seconds, "
      "r.kind, "
      "       r.load_source, r.model, s.sweep, s.cell "
      "FROM runs r JOIN run_summary s ON s.id = r.id "
      "WHERE ?1 IS NULL OR r.id = ?1 "
      "ORDER BY r.id");
  select.bind_optional_int64(1, run);
  std::vector<RunSummary> runs;
  while (select.step()) runs.push_back(summary_from_row(select));
  return runs;
}

std::vector<StepRecord> read_steps(const sqlite::Database& db, int64_t run, int schema_version) {
  // The column arrived with schema 3.
  const char* moe_modeled_seconds = schema_version >= 3 ? "moe_modeled_seconds" : "NULL";
  sqlite::Statement select = db.prepare(fmt::format(
      "SELECT step, train_loss, eval_loss, lr, grad_norm, tokens, step_seconds, moe_seconds, {} "
      "FROM steps WHERE run = ?1 ORDER BY step",
      moe_modeled_seconds));
  select.bind_int64(1, run);
  std::vector<StepRecord> steps;
  while (select.step()) {
    StepRecord step;
    step.step = select.column_int64(0);
    step.train_loss = select.column_double(1);
    step.eval_loss = select.column_optional_double(2);
    step.lr = select.column_double(3);
    step.grad_norm = select.column_double(4);
    step.tokens = select.column_int64(5);
    step.step_seconds = select.column_double(6);
    step.moe_seconds = select.column_double(7);
    step.moe_modeled_seconds = select.column_double(8);
    steps.push_back(step);
  }
  return steps;
}

}  // namespace lrmoe::store
