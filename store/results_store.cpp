// ResultsStore on SQLite: opening (pragmas, schema checks, migration, settling interrupted
// runs) and the public operations, each delegated to the file that owns its concern.

#include "store/results_store.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <utility>

#include "store/buffered_writer.hpp"
#include "store/expert_load_history.hpp"
#include "store/interrupted_runs.hpp"
#include "store/local_process.hpp"
#include "store/patient_lock.hpp"
#include "store/read_only_query.hpp"
#include "store/recorded_tables.hpp"
#include "store/run_figures.hpp"
#include "store/run_projections.hpp"
#include "store/run_reader.hpp"
#include "store/schema.hpp"
#include "store/sqlite_handle.hpp"
#include "store/sweep_records.hpp"
#include "store/utc_timestamp.hpp"

namespace lrmoe {
namespace {

namespace fs = std::filesystem;

// A reader or a second writer can hold the lock briefly (a flush); waiting beats failing. A
// reader gives up after 5 s; a writer, which may be hours into a run, waits up to two minutes,
// saying so (store/patient_lock.hpp).
constexpr int kReaderBusyTimeoutMilliseconds = 5000;
constexpr std::chrono::seconds kWriterPatience{120};

class SqliteResultsStore final : public ResultsStore {
 public:
  SqliteResultsStore(const std::string& path, sqlite::OpenMode mode) : db_(path, mode) {
    if (mode == sqlite::OpenMode::kReadWriteCreate) {
      patient_lock_.emplace(db_, kWriterPatience);
      open_for_writing();
    } else {
      sqlite3_busy_timeout(db_.handle(), kReaderBusyTimeoutMilliseconds);
      open_for_reading();
    }
  }

  ~SqliteResultsStore() override {
    if (!writer_) return;
    try {
      writer_->flush();
    } catch (const std::exception& error) {
      // A destructor must not throw; saying what was lost beats losing it silently.
      fmt::print(stderr, "lrmoe: {}\n", error.what());
    }
  }

  const std::string& path() const override { return db_.path(); }

  int64_t begin_run(const RunInfo& info) override {
    require_writable();
    sqlite::Transaction transaction(db_);
    sqlite::Statement insert = db_.prepare(
        "INSERT INTO runs (name, status, started_at, resolved_toml, toml_sha256, code_version, "
        "host, pid, torch_version, blas, seed, params_total, params_active, target_loss, ranks, "
        "policies, processes, hardware_profile, memory_per_rank, kind, load_source, "
        "process_start, model) VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
        "?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)");
    const int64_t pid = info.pid != 0 ? info.pid : store::this_process_id();
    insert.bind_text(1, info.name)
        .bind_text(2, store::utc_timestamp_now())
        .bind_text(3, info.resolved_toml)
        .bind_text(4, info.toml_sha256)
        .bind_text(5, info.code_version)
        .bind_text(6, info.host.empty() ? store::this_host_name() : info.host)
        .bind_int64(7, pid)
        .bind_text(8, info.torch_version)
        .bind_text(9, info.blas)
        .bind_int64(10, static_cast<int64_t>(info.seed))
        .bind_int64(11, info.params_total)
        .bind_int64(12, info.params_active)
        .bind_optional_double(13, info.target_loss)
        .bind_int64(14, info.ranks)
        .bind_text(15, info.policies)
        .bind_int64(16, info.processes)
        .bind_text(17, info.hardware_profile)
        .bind_int64(18, info.memory_per_rank)
        .bind_text(19, info.replay ? "replay" : "train")
        .bind_text(22, info.model);
    if (info.replay) {
      insert.bind_text(20, info.load_source);
    } else {
      insert.bind_null(20);
    }
    // Another host's process cannot be read from here; neither can one that has exited.
    const std::string start = info.host.empty() ? store::process_start_mark(pid) : "";
    if (start.empty()) {
      insert.bind_null(21);
    } else {
      insert.bind_text(21, start);
    }
    insert.execute();
    const int64_t run = db_.last_insert_rowid();
    if (info.sweep_cell) store::add_sweep_run(db_, run, *info.sweep_cell, info.experiment_identity);
    transaction.commit();
    return run;
  }

  void add_plugins(int64_t run, const std::vector<PluginRecordRow>& plugins) override {
    require_writable();
    sqlite::Transaction transaction(db_);
    sqlite::Statement insert = db_.prepare(
        "INSERT INTO run_plugins (run, kind, name, version, parameters, path, sha256) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    for (const PluginRecordRow& plugin : plugins) {
      insert.bind_int64(1, run)
          .bind_text(2, plugin.kind)
          .bind_text(3, plugin.name)
          .bind_text(4, plugin.version)
          .bind_text(5, plugin.parameters)
          .bind_text(6, plugin.path)
          .bind_text(7, plugin.sha256);
      insert.execute();
    }
    transaction.commit();
  }

  void add_data(int64_t run, const RunDataRow& data) override {
    require_writable();
    db_.prepare(
           "INSERT INTO run_data (run, kind, path, bytes, sha256, tokens, corpus, corpus_bytes, "
           "corpus_sha256, corpus_sources, tokenizer, tokenizer_vocab, tokenizer_sha256) "
           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)")
        .bind_int64(1, run)
        .bind_text(2, data.kind)
        .bind_optional_text(3, data.path)
        .bind_optional_int64(4, data.bytes)
        .bind_optional_text(5, data.sha256)
        .bind_optional_int64(6, data.tokens)
        .bind_optional_text(7, data.corpus)
        .bind_optional_int64(8, data.corpus_bytes)
        .bind_optional_text(9, data.corpus_sha256)
        .bind_optional_text(10, data.corpus_sources)
        .bind_optional_text(11, data.tokenizer)
        .bind_optional_int64(12, data.tokenizer_vocab)
        .bind_optional_text(13, data.tokenizer_sha256)
        .execute();
  }

  void add_process_states(int64_t run, const std::vector<ProcessStateRecord>& states) override {
    require_writable();
    sqlite::Transaction transaction(db_);
    sqlite::Statement insert = db_.prepare(
        "INSERT OR REPLACE INTO process_state (run, process, dense_parameters, "
        "expert_parameters, dense_bytes, expert_bytes, optimizer_bytes) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    for (const ProcessStateRecord& s : states) {
      insert.bind_int64(1, run)
          .bind_int64(2, s.process)
          .bind_int64(3, s.dense_parameters)
          .bind_int64(4, s.expert_parameters)
          .bind_int64(5, s.dense_bytes)
          .bind_int64(6, s.expert_bytes)
          .bind_int64(7, s.optimizer_bytes);
      insert.execute();
    }
    transaction.commit();
  }

  void add_step(int64_t run, const StepRecord& step) override { writer().add_step(run, step); }

  void add_expert_load(int64_t run, int64_t step, int64_t layer,
                       const std::vector<int64_t>& pairs_per_expert) override {
    writer().add_expert_load(run, step, layer, pairs_per_expert);
  }

  void add_layer_step(int64_t run, const LayerStepRecord& record) override {
    writer().add_layer_step(run, record);
  }

  void add_rank_memory(int64_t run, const RankMemoryRecord& record) override {
    writer().add_rank_memory(run, record);
  }

  void add_rank_layer(int64_t run, const RankLayerRecord& record) override {
    writer().add_rank_layer(run, record);
  }

  void add_process_layer(int64_t run, const ProcessLayerRecord& record) override {
    writer().add_process_layer(run, record);
  }

  void add_trace_span(int64_t run, const TraceSpanRecord& record) override {
    writer().add_trace_span(run, record);
  }

  void add_placement(int64_t run, const PlacementRecord& record) override {
    writer().add_placement(run, record);
  }

  void add_event(int64_t run, const std::string& level, const std::string& message) override {
    writer().add_event(run, level, message);
  }

  void flush() override { writer().flush(); }

  void resume_run(int64_t run, int64_t step) override {
    require_writable();
    writer().flush();
    sqlite::Transaction transaction(db_);
    sqlite::Statement status = db_.prepare("SELECT status FROM runs WHERE id = ?1");
    status.bind_int64(1, run);
    if (!status.step())
      throw db_.error_with_message(fmt::format("has no run {}; lrmoe runs lists them", run));
    const std::string current = status.column_text(0);
    status.reset();
    if (current != "stopped" && current != "interrupted" && current != "failed") {
      throw db_.error_with_message(fmt::format(
          "run {} is {}: only a stopped, interrupted or failed run can be resumed", run, current));
    }
    sqlite::Statement recorded =
        db_.prepare("SELECT count(*) FROM steps WHERE run = ?1 AND step <= ?2");
    recorded.bind_int64(1, run).bind_int64(2, step);
    recorded.step();
    if (recorded.column_int64(0) != step) {
      throw db_.error_with_message(fmt::format(
          "run {} recorded {} of its first {} steps: its checkpoint after step {} cannot continue "
          "it in the same rows",
          run, recorded.column_int64(0), step, step));
    }
    recorded.reset();
    for (const store::TableColumns* table : store::recorded_tables()) {
      const auto& columns = table->columns();
      if (std::none_of(columns.begin(), columns.end(),
                       [](const store::ColumnDescription& c) { return c.name == "step"; })) {
        continue;
      }
      sqlite::Statement remove =
          db_.prepare("DELETE FROM " + table->table() + " WHERE run = ?1 AND step > ?2");
      remove.bind_int64(1, run).bind_int64(2, step);
      remove.execute();
    }
    sqlite::Statement update = db_.prepare(
        "UPDATE runs SET status = 'running', ended_at = NULL, host = ?2, pid = ?3, "
        "process_start = ?4, ttt_step = NULL, ttt_step_seconds = NULL, ttt_moe_seconds = NULL, "
        "ttt_moe_modeled_seconds = NULL, ttt_moe_critical_seconds = NULL WHERE id = ?1");
    update.bind_int64(1, run)
        .bind_text(2, store::this_host_name())
        .bind_int64(3, store::this_process_id())
        .bind_text(4, store::process_start_mark(store::this_process_id()));
    update.execute();
    transaction.commit();
  }

  void finish_run(int64_t run, const std::string& status,
                  const std::optional<TimeToTarget>& time_to_target) override {
    writer().flush();
    sqlite::Statement update = db_.prepare(
        "UPDATE runs SET status = ?2, ended_at = ?3, ttt_step = ?4, ttt_step_seconds = ?5, "
        "ttt_moe_seconds = ?6, ttt_moe_modeled_seconds = ?7, ttt_moe_critical_seconds = ?8 WHERE "
        "id = ?1");
    update.bind_int64(1, run).bind_text(2, status).bind_text(3, store::utc_timestamp_now());
    if (time_to_target) {
      update.bind_int64(4, time_to_target->step)
          .bind_double(5, time_to_target->step_seconds)
          .bind_double(6, time_to_target->moe_seconds)
          .bind_double(7, time_to_target->moe_modeled_seconds)
          .bind_double(8, time_to_target->moe_critical_seconds);
    }
    update.execute();
    if (db_.changes() == 0) {
      throw db_.error_with_message(fmt::format("cannot finish run {}: there is no such run", run));
    }
  }

  SweepCellNumbers record_sweep(const SweepRecord& sweep) override {
    require_writable();
    return store::record_sweep(db_, sweep);
  }

  std::vector<SweepCellState> sweep_cells(int64_t sweep) const override {
    require_current_schema();
    return store::read_sweep_cells(db_, sweep);
  }

  std::vector<int64_t> sweep_last_runs(const std::string& name) const override {
    require_current_schema();
    return store::read_sweep_last_runs(db_, name);
  }

  std::vector<RunFigures> run_figures(const std::vector<int64_t>& runs) const override {
    require_current_schema();
    return store::read_run_figures(db_, runs);
  }

  void add_projection(const ProjectionRecord& projection) override {
    require_writable();
    store::write_projection(db_, projection);
  }

  std::vector<ProjectionRecord> projections(const std::vector<int64_t>& runs) const override {
    require_current_schema();
    return store::read_projections(db_, runs);
  }

  ExpertLoadHistory expert_load_history(int64_t run, int64_t last_steps) const override {
    require_current_schema();
    return store::read_expert_load_history(db_, run, last_steps);
  }

  std::vector<RunSummary> list_runs() const override {
    require_current_schema();
    return store::read_run_summaries(db_);
  }

  std::optional<RunSummary> find_run(int64_t id) const override {
    require_current_schema();
    std::vector<RunSummary> runs = store::read_run_summaries(db_, id);
    if (runs.empty()) return std::nullopt;
    return std::move(runs.front());
  }

  std::vector<StepRecord> steps(int64_t run) const override {
    return store::read_steps(db_, run, schema_version_);
  }

  QueryResult query(const std::string& sql, const QueryLimits& limits) const override {
    return store::run_read_only_query(db_, sql, limits);
  }

 private:
  void open_for_writing() {
    // A file we may not write would only fail later, on the first step of a run.
    if (sqlite3_db_readonly(db_.handle(), "main") == 1) {
      throw db_.error_with_message(
          "the file is read-only; check its permissions or pass another --db path");
    }
    // Checked before anything is written, so a file that is not ours stays untouched.
    store::checked_schema_version(db_);
    // WAL: readers (lrmoe runs/show/query) never block a training run's writes, and a commit
    // costs one sync. synchronous=NORMAL keeps every commit across a crash of the process;
    // only a power loss can take back the last ones.
    db_.execute("PRAGMA journal_mode = WAL", "switching to WAL mode");
    db_.execute("PRAGMA synchronous = NORMAL");
    db_.execute("PRAGMA foreign_keys = ON");
    store::migrate(db_, current_schema_version());
    schema_version_ = current_schema_version();
    store::mark_interrupted_runs(db_);
    writer_.emplace(db_);
  }

  // Reads whatever schema the file has, up to ours: `query` works on any, the summaries need
  // the current one (see require_current_schema).
  void open_for_reading() {
    schema_version_ = store::checked_schema_version(db_);
    if (schema_version_ == 0) {
      throw db_.error_with_message(
          "holds no lrmoe results (it is empty); pass the --db path of a results database");
    }
    // A writer settles the abandoned runs when it opens the file; a reader may not write, so
    // every read of `runs` on this connection shows them as 'interrupted?'.
    if (schema_version_ == current_schema_version()) store::show_abandoned_runs_as_interrupted(db_);
  }

  void require_current_schema() const {
    if (schema_version_ < current_schema_version()) {
      throw db_.error_with_message(fmt::format(
          "has the older schema {} (this build reads {}); any lrmoe command that writes to it "
          "(such as `lrmoe run`) upgrades it, and `lrmoe query` reads it as it is",
          schema_version_, current_schema_version()));
    }
  }

  void require_writable() const {
    if (!writer_) throw db_.error_with_message("was opened read-only; it cannot record runs");
  }

  store::BufferedWriter& writer() {
    require_writable();
    return *writer_;
  }

  sqlite::Database db_;
  std::optional<store::PatientLock> patient_lock_;  // writers only
  int schema_version_ = 0;
  std::optional<store::BufferedWriter> writer_;  // absent when opened read-only
};

// Path problems SQLite reports poorly or not at all: a folder reads as "disk I/O error", a
// missing file as "unable to open database file"; "" and ":memory:" open a database that
// vanishes when the command ends, so a run would keep nothing; a FIFO makes it wait forever.
void refuse_unusable_path(const std::string& path, bool must_exist) {
  if (path.empty() || path == ":memory:" || path.find('\0') != std::string::npos) {
    throw StoreError(fmt::format(
        "results database '{}': not a file path (SQLite would keep the results in memory only, "
        "and lose them); pass the path of a database file, such as results.db",
        path.substr(0, path.find('\0'))));
  }
  std::error_code ignored;
  const fs::file_status status = fs::status(path, ignored);
  if (fs::exists(status) && !fs::is_regular_file(status) && !fs::is_directory(status)) {
    throw StoreError(fmt::format(
        "results database '{}': not a regular file (a FIFO, socket or device); pass the path of "
        "a database file",
        path));
  }
  if (fs::is_directory(status)) {
    throw StoreError(fmt::format(
        "results database '{}': is a folder; pass the path of a database file, such as {}", path,
        (fs::path(path) / "results.db").string()));
  }
  if (must_exist && !fs::exists(path, ignored)) {
    throw StoreError(fmt::format(
        "results database '{}': no such file; pass the --db path of an existing results "
        "database",
        path));
  }
}

}  // namespace

std::unique_ptr<ResultsStore> ResultsStore::open(const std::string& path) {
  refuse_unusable_path(path, false);
  return std::make_unique<SqliteResultsStore>(path, sqlite::OpenMode::kReadWriteCreate);
}

std::unique_ptr<ResultsStore> ResultsStore::open_read_only(const std::string& path) {
  refuse_unusable_path(path, true);
  try {
    return std::make_unique<SqliteResultsStore>(path, sqlite::OpenMode::kReadOnly);
  } catch (const StoreError&) {
    // A WAL database cannot be read where its -shm file cannot be made (a read-only mount).
    // Nothing can write there either, so it is read as immutable, unless a write-ahead log
    // holds commits that immutable reading would not see.
    const fs::path folder = fs::absolute(path).parent_path();
    std::error_code missing;
    const auto log_bytes = fs::file_size(path + "-wal", missing);
    if (access(folder.c_str(), W_OK) == 0 || (!missing && log_bytes > 0)) throw;
    return std::make_unique<SqliteResultsStore>(path, sqlite::OpenMode::kImmutable);
  }
}

}  // namespace lrmoe
