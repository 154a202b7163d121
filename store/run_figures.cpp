#include "store/run_figures.hpp"

#include <fmt/format.h>

namespace lrmoe::store {

std::vector<RunFigures> read_run_figures(const sqlite::Database& db,
                                         const std::vector<int64_t>& runs) {
  sqlite::Statement select = db.prepare(
      "SELECT r.id, r.status, r.seed, r.policies, r.resolved_toml, "
      "       (SELECT count(*) FROM steps s WHERE s.run = r.id), r.target_loss, r.ttt_step, "
      "       r.ttt_step_seconds, r.ttt_moe_seconds, r.ttt_moe_modeled_seconds, "
      "       r.ttt_moe_critical_seconds, "
      "       (SELECT max(peak_subtotal) FROM memory_peak m WHERE m.run = r.id), "
      "       coalesce(l.routed, 0), coalesce(l.dropped, 0), coalesce(l.kept, 0), "
      "       sr.sweep, sr.cell, "
      "       (SELECT avg(moe_modeled_seconds) FROM steps s WHERE s.run = r.id AND NOT EXISTS "
      "          (SELECT 1 FROM moe_layer_steps w WHERE w.run = s.run AND w.step = s.step "
      "           AND w.placement_information = 'warm-up')), "
      "       coalesce(r.model, ''), coalesce(c.model, ''), coalesce(c.variant, ''), "
      "       l.replicas, l.imbalance "
      "FROM runs r "
      "LEFT JOIN (SELECT run, sum(pairs_routed) AS routed, sum(pairs_dropped) AS dropped, "
      "                  sum(pairs_kept) AS kept, avg(replicas) AS replicas, "
      "                  avg(forward_load_max / nullif(forward_load_mean, 0)) AS imbalance "
      "           FROM moe_layer_steps WHERE run = ?1) l "
      "  ON l.run = r.id "
      "LEFT JOIN sweep_runs sr ON sr.run = r.id "
      "LEFT JOIN sweep_cells c ON c.sweep = sr.sweep AND c.cell = sr.cell "
      "WHERE r.id = ?1");
  sqlite::Statement plugins = db.prepare(
      "SELECT kind, name, version, parameters, path, sha256 FROM run_plugins WHERE run = ?1 "
      "ORDER BY kind");
  sqlite::Statement values = db.prepare(
      "SELECT key, value FROM sweep_cell_values WHERE sweep = ?1 AND cell = ?2 ORDER BY position");
  std::vector<RunFigures> figures;
  for (int64_t run : runs) {
    select.bind_int64(1, run);
    if (!select.step())
      throw db.error_with_message(fmt::format("has no run {}; lrmoe runs lists them", run));
    RunFigures f;
    f.run = select.column_int64(0);
    f.status = select.column_text(1);
    f.seed = static_cast<uint64_t>(select.column_int64(2));
    f.policies = select.column_text(3);
    f.resolved_toml = select.column_text(4);
    f.steps = select.column_int64(5);
    f.target_loss = select.column_optional_double(6);
    if (const auto step = select.column_optional_int64(7)) {
      f.time_to_target = TimeToTarget{*step, select.column_double(8), select.column_double(9),
                                      select.column_double(10), select.column_double(11)};
    }
    f.peak_subtotal = select.column_optional_int64(12);
    f.pairs_routed = select.column_int64(13);
    f.pairs_dropped = select.column_int64(14);
    f.pairs_kept = select.column_int64(15);
    const std::optional<int64_t> sweep = select.column_optional_int64(16);
    const std::optional<int64_t> cell = select.column_optional_int64(17);
    f.modeled_seconds_per_step = select.column_optional_double(18);
    f.model = select.column_text(19);
    f.sweep_model = select.column_text(20);
    f.sweep_variant = select.column_text(21);
    f.replicas = select.column_optional_double(22);
    f.forward_imbalance = select.column_optional_double(23);
    select.reset();
    plugins.bind_int64(1, run);
    while (plugins.step()) {
      f.plugins.push_back({plugins.column_text(0), plugins.column_text(1), plugins.column_text(2),
                           plugins.column_text(3), plugins.column_text(4), plugins.column_text(5)});
    }
    plugins.reset();
    if (sweep && cell) {
      values.bind_int64(1, *sweep).bind_int64(2, *cell);
      while (values.step())
        f.cell_values.emplace_back(values.column_text(0), values.column_text(1));
      values.reset();
    }
    figures.push_back(std::move(f));
  }
  return figures;
}

std::vector<int64_t> read_sweep_last_runs(const sqlite::Database& db, const std::string& name) {
  sqlite::Statement find = db.prepare("SELECT id FROM sweeps WHERE name = ?1");
  find.bind_text(1, name);
  if (!find.step()) {
    std::string known;
    sqlite::Statement all = db.prepare("SELECT name FROM sweeps ORDER BY id");
    while (all.step()) known += (known.empty() ? "'" : ", '") + all.column_text(0) + "'";
    throw db.error_with_message(
        fmt::format("has no sweep '{}'; {}", name,
                    known.empty() ? "it holds no sweeps" : "its sweeps: " + known));
  }
  sqlite::Statement runs =
      db.prepare("SELECT max(run) FROM sweep_runs WHERE sweep = ?1 GROUP BY cell ORDER BY cell");
  runs.bind_int64(1, find.column_int64(0));
  std::vector<int64_t> last;
  while (runs.step()) last.push_back(runs.column_int64(0));
  return last;
}

}  // namespace lrmoe::store
