#pragma once
// The column list of each table the hot-path writer (store/buffered_writer.cpp) fills: which
// record field goes into which column. Adding a recorded quantity to one of these tables is its
// field in the record (store/results_store.hpp, or below), its line in the table's list
// (store/recorded_tables.cpp) and the migration that adds the column (store/schema.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "store/column_list.hpp"
#include "store/results_store.hpp"

namespace lrmoe::store {

// Token-expert pairs routed to one expert of one MoE layer in one step.
struct ExpertLoadRecord {
  int64_t step = 0, layer = 0, expert = 0, pairs = 0;
};

// One event; `time` is stamped when the event is added, not when it is written.
struct EventRecord {
  std::string time, level, message;
};

const ColumnList<StepRecord>& steps_columns();
const ColumnList<ExpertLoadRecord>& expert_load_columns();
const ColumnList<LayerStepRecord>& moe_layer_steps_columns();
const ColumnList<RankMemoryRecord>& rank_memory_columns();
const ColumnList<RankLayerRecord>& rank_layer_steps_columns();
const ColumnList<ProcessLayerRecord>& process_layer_steps_columns();
const ColumnList<TraceSpanRecord>& trace_spans_columns();
const ColumnList<PlacementRecord>& placements_columns();
const ColumnList<EventRecord>& events_columns();

// Every list above, for the checks against the schema.
std::vector<const TableColumns*> recorded_tables();

}  // namespace lrmoe::store
