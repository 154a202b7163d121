#pragma once
// The results database (SQLite). One file holds every run of a project: runs, steps, per-step
// expert load and events. Schema and migrations: store/schema.cpp.
//
// Writes on the training hot path (steps, expert load, events) are buffered and committed in one
// transaction per flush; a killed process therefore loses at most the unflushed tail, and every
// committed step stays readable. Opening a database marks runs whose process is gone as
// 'interrupted'.

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lrmoe {

// A database problem a user can cause or fix (bad path, not a database, newer schema, SQL
// error in `lrmoe query`). The message names the file.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunInfo {
  std::string name;
  std::string resolved_toml;
  std::string toml_sha256;
  std::string code_version;
  std::string host;
  int64_t pid = 0;
  std::string torch_version;
  std::string blas;
  uint64_t seed = 0;
  int64_t params_total = 0;
  int64_t params_active = 0;
  std::optional<double> target_loss;
};

struct StepRecord {
  int64_t step = 0;
  double train_loss = 0;
  std::optional<double> eval_loss;
  double lr = 0;
  double grad_norm = 0;
  int64_t tokens = 0;          // tokens in this step
  double step_seconds = 0;     // wall time of the step
  double moe_seconds = 0;      // wall time inside MoE layers (forward + backward)
};

// Cumulative times until the evaluation loss first reached the target.
struct TimeToTarget {
  int64_t step = 0;
  double step_seconds = 0;
  double moe_seconds = 0;
};

struct RunSummary {
  int64_t id = 0;
  std::string name;
  std::string status;  // running | finished | failed | stopped | interrupted
  std::string started_at;
  std::optional<std::string> ended_at;
  std::string resolved_toml;
  std::string toml_sha256;
  std::string code_version;
  std::string host;
  std::string torch_version;
  std::string blas;
  uint64_t seed = 0;
  int64_t params_total = 0;
  int64_t params_active = 0;
  std::optional<double> target_loss;
  std::optional<TimeToTarget> time_to_target;
  int64_t steps = 0;
  std::optional<double> final_train_loss;
  std::optional<double> final_eval_loss;
};

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;  // nullopt: SQL NULL
};

class ResultsStore {
 public:
  // Opens (creating if needed) and migrates to the current schema. Throws StoreError.
  static std::unique_ptr<ResultsStore> open(const std::string& path);
  // Opens an existing database without writing anything (for `runs`, `show`, `query`). A file
  // with an older schema opens too, but only `steps` and `query` read it; the summaries
  // (`list_runs`, `find_run`) ask for the upgrade that any open() does. Runs are not settled
  // as 'interrupted' here: that is a write.
  static std::unique_ptr<ResultsStore> open_read_only(const std::string& path);

  virtual ~ResultsStore() = default;
  virtual const std::string& path() const = 0;

  // Records a new run as 'running', now. An empty `host` and a zero `pid` mean this host and
  // this process: the pair that lets a later open() notice the process is gone.
  virtual int64_t begin_run(const RunInfo& info) = 0;
  virtual void add_step(int64_t run, const StepRecord& step) = 0;
  // pairs_per_expert[e]: token-expert pairs routed to expert e of `layer` in `step`.
  virtual void add_expert_load(int64_t run, int64_t step, int64_t layer,
                               const std::vector<int64_t>& pairs_per_expert) = 0;
  virtual void add_event(int64_t run, const std::string& level, const std::string& message) = 0;
  // Commits everything buffered in one transaction (also done on its own past 20k buffered
  // rows, and by the destructor). If it fails, the batch is dropped and the StoreError says
  // how many rows were lost, so that one bad row cannot make every later flush fail.
  virtual void flush() = 0;
  // Flushes, then records the final status, end time and time-to-target.
  virtual void finish_run(int64_t run, const std::string& status,
                          const std::optional<TimeToTarget>& time_to_target) = 0;

  // The readers see committed rows only: flush() first to read what this store buffered.
  virtual std::vector<RunSummary> list_runs() const = 0;
  virtual std::optional<RunSummary> find_run(int64_t id) const = 0;
  virtual std::vector<StepRecord> steps(int64_t run) const = 0;
  // Runs one read-only SQL statement and returns its rows as text. Several statements, or one
  // that could write, are refused with a StoreError.
  virtual QueryResult query(const std::string& sql) const = 0;
};

// The schema version this build writes (PRAGMA user_version).
int current_schema_version();

}  // namespace lrmoe
