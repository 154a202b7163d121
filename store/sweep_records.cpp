#include "store/sweep_records.hpp"

#include <fmt/format.h>

#include <optional>

#include "store/utc_timestamp.hpp"

namespace lrmoe::store {
namespace {

const char* kind_text(SweepKind kind) {
  return kind == SweepKind::Train ? "train" : "replay";
}

// The sweep named `name`, if any: its id, and whether it is of `kind` (a name holds one kind).
std::optional<int64_t> find_sweep(const sqlite::Database& db, const std::string& name,
                                  SweepKind kind) {
  sqlite::Statement select = db.prepare("SELECT id, kind FROM sweeps WHERE name = ?1");
  select.bind_text(1, name);
  if (!select.step()) return std::nullopt;
  if (select.column_text(1) != kind_text(kind)) {
    throw db.error_with_message(
        fmt::format("holds a {} named '{}'; a {} cannot be recorded into it: give it another name",
                    kind == SweepKind::Train ? "replay's variants" : "training sweep", name,
                    kind == SweepKind::Train ? "training sweep" : "replay"));
  }
  return select.column_int64(0);
}

}  // namespace

SweepCellNumbers record_sweep(sqlite::Database& db, const SweepRecord& sweep) {
  sqlite::Transaction transaction(db);
  SweepCellNumbers numbers;
  if (const std::optional<int64_t> id = find_sweep(db, sweep.name, sweep.kind)) {
    numbers.sweep = *id;
  } else {
    sqlite::Statement insert =
        db.prepare("INSERT INTO sweeps (name, file, created_at, kind) VALUES (?1, ?2, ?3, ?4)");
    insert.bind_text(1, sweep.name)
        .bind_text(2, sweep.file)
        .bind_text(3, utc_timestamp_now())
        .bind_text(4, kind_text(sweep.kind));
    insert.execute();
    numbers.sweep = db.last_insert_rowid();
  }
  sqlite::Statement find = db.prepare(
      "SELECT cell, experiment_sha256 FROM sweep_cells WHERE sweep = ?1 AND settings = ?2");
  // A cell's labels are names, not part of its identity: the sweep file's latest ones hold.
  sqlite::Statement relabel =
      db.prepare("UPDATE sweep_cells SET model = ?3, variant = ?4 WHERE sweep = ?1 AND cell = ?2");
  sqlite::Statement next =
      db.prepare("SELECT coalesce(max(cell) + 1, 0) FROM sweep_cells WHERE sweep = ?1");
  sqlite::Statement insert_cell = db.prepare(
      "INSERT INTO sweep_cells (sweep, cell, settings, label, experiment_sha256, model, variant) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  sqlite::Statement insert_value = db.prepare(
      "INSERT INTO sweep_cell_values (sweep, cell, key, value, position) "
      "VALUES (?1, ?2, ?3, ?4, ?5)");
  for (const SweepCellRecord& cell : sweep.cells) {
    find.bind_int64(1, numbers.sweep).bind_text(2, cell.settings);
    if (find.step()) {
      const int64_t number = find.column_int64(0);
      const std::string recorded = find.column_text(1);
      find.reset();
      if (recorded != cell.experiment_sha256) {
        throw db.error_with_message(fmt::format(
            "sweep '{}' cell {} ({}) was recorded from an experiment that resolved differently "
            "(the base experiment or a file it extends has changed since); give this sweep "
            "another name (name = \"...\" in the sweep file) or use another --db",
            sweep.name, number, cell.label));
      }
      relabel.bind_int64(1, numbers.sweep)
          .bind_int64(2, number)
          .bind_text(3, cell.model)
          .bind_text(4, cell.variant);
      relabel.execute();
      numbers.cells.push_back(number);
      continue;
    }
    find.reset();
    next.bind_int64(1, numbers.sweep);
    next.step();
    const int64_t number = next.column_int64(0);
    next.reset();
    insert_cell.bind_int64(1, numbers.sweep)
        .bind_int64(2, number)
        .bind_text(3, cell.settings)
        .bind_text(4, cell.label)
        .bind_text(5, cell.experiment_sha256)
        .bind_text(6, cell.model)
        .bind_text(7, cell.variant);
    insert_cell.execute();
    for (std::size_t i = 0; i < cell.values.size(); ++i) {
      insert_value.bind_int64(1, numbers.sweep)
          .bind_int64(2, number)
          .bind_text(3, cell.values[i].first)
          .bind_text(4, cell.values[i].second)
          .bind_int64(5, static_cast<int64_t>(i));
      insert_value.execute();
    }
    numbers.cells.push_back(number);
  }
  transaction.commit();
  return numbers;
}

std::vector<SweepCellState> read_sweep_cells(const sqlite::Database& db, int64_t sweep) {
  sqlite::Statement select = db.prepare(
      "SELECT c.cell, c.settings, c.label, last.run, r.status, coalesce(last.runs, 0), "
      "       sr.experiment_sha256 IN ('', c.experiment_sha256) "
      "FROM sweep_cells c "
      "LEFT JOIN (SELECT cell, max(run) AS run, count(*) AS runs FROM sweep_runs "
      "           WHERE sweep = ?1 GROUP BY cell) last ON last.cell = c.cell "
      "LEFT JOIN runs r ON r.id = last.run "
      "LEFT JOIN sweep_runs sr ON sr.run = last.run "
      "WHERE c.sweep = ?1 ORDER BY c.cell");
  select.bind_int64(1, sweep);
  std::vector<SweepCellState> cells;
  while (select.step()) {
    SweepCellState cell;
    cell.cell = select.column_int64(0);
    cell.settings = select.column_text(1);
    cell.label = select.column_text(2);
    cell.run = select.column_optional_int64(3);
    cell.status = select.column_optional_text(4).value_or("");
    cell.runs = select.column_int64(5);
    cell.run_matches = !cell.run || select.column_int64(6) != 0;
    cells.push_back(std::move(cell));
  }
  return cells;
}

void add_sweep_run(sqlite::Database& db, int64_t run, const SweepCellTag& tag,
                   const std::string& experiment_identity) {
  sqlite::Statement insert = db.prepare(
      "INSERT INTO sweep_runs (run, sweep, cell, experiment_sha256) VALUES (?1, ?2, ?3, ?4)");
  insert.bind_int64(1, run)
      .bind_int64(2, tag.sweep)
      .bind_int64(3, tag.cell)
      .bind_text(4, experiment_identity);
  insert.execute();
  // Every cell shares the base experiment's name: the run goes by its sweep and cell, and by
  // the cell's model label where the sweep names one.
  sqlite::Statement name = db.prepare(
      "UPDATE runs SET name = (SELECT name FROM sweeps WHERE id = ?2) || '/' || ?3, "
      "model = coalesce((SELECT nullif(model, '') FROM sweep_cells WHERE sweep = ?2 AND cell = "
      "?3), "
      "model) WHERE id = ?1");
  name.bind_int64(1, run).bind_int64(2, tag.sweep).bind_int64(3, tag.cell);
  name.execute();
}

}  // namespace lrmoe::store
