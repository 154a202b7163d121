#pragma once
// The hot-path writer: steps, expert load, layer statistics, rank memory and events are
// collected in memory and written by flush() in one transaction, through prepared statements
// that are reused for every row. One transaction per row would cost a disk sync per row; one per
// flush costs one.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/results_store.hpp"
#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

class BufferedWriter {
 public:
  // Past this many buffered rows an add flushes on its own, bounding memory on long runs that
  // flush rarely (a step with 12 MoE layers x 64 experts on 8 ranks adds 789 rows).
  static constexpr size_t kAutoFlushRows = 20000;

  explicit BufferedWriter(sqlite::Database& db);

  void add_step(int64_t run, const StepRecord& step);
  void add_expert_load(int64_t run, int64_t step, int64_t layer,
                       const std::vector<int64_t>& pairs_per_expert);
  void add_layer_step(int64_t run, const LayerStepRecord& record);
  void add_rank_memory(int64_t run, const RankMemoryRecord& record);
  void add_rank_layer(int64_t run, const RankLayerRecord& record);
  void add_process_layer(int64_t run, const ProcessLayerRecord& record);
  void add_event(int64_t run, const std::string& level, const std::string& message);

  // Writes every buffered row in one transaction. On failure nothing of the batch is written
  // and the batch is dropped (the error says how many rows), so that one bad row cannot make
  // every later flush, and with it finish_run, fail too.
  void flush();

  size_t buffered_rows() const;

 private:
  template <typename Record>
  struct RunRow {
    int64_t run;
    Record record;
  };
  struct ExpertLoadRow {
    int64_t run, step, layer, expert, pairs;
  };
  struct EventRow {
    int64_t run;
    std::string time, level, message;
  };

  void flush_if_large();
  void write_buffered_rows();
  void clear();

  sqlite::Database& db_;
  sqlite::Statement insert_step_;
  sqlite::Statement insert_expert_load_;
  sqlite::Statement insert_layer_step_;
  sqlite::Statement insert_rank_memory_;
  sqlite::Statement insert_rank_layer_;
  sqlite::Statement insert_process_layer_;
  sqlite::Statement insert_event_;
  std::vector<RunRow<StepRecord>> steps_;
  std::vector<ExpertLoadRow> expert_load_;
  std::vector<RunRow<LayerStepRecord>> layer_steps_;
  std::vector<RunRow<RankMemoryRecord>> rank_memory_;
  std::vector<RunRow<RankLayerRecord>> rank_layers_;
  std::vector<RunRow<ProcessLayerRecord>> process_layers_;
  std::vector<EventRow> events_;
};

}  // namespace lrmoe::store
