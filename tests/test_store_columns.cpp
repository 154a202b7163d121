// The column lists of the recorded tables (store/recorded_tables.cpp): the INSERT and binds they
// generate, their agreement with the schema, and every field landing in its own column.

#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "store/column_list.hpp"
#include "store/recorded_tables.hpp"
#include "store/results_store.hpp"
#include "store/schema.hpp"
#include "store/sqlite_handle.hpp"
#include "support/rank_memory_row.hpp"
#include "support/temp_folder.hpp"

using lrmoe::ResultsStore;
using lrmoe::store::ColumnList;
using lrmoe::store::ColumnType;
using lrmoe_test::TempFolder;

namespace {

struct Sample {
  int64_t count = 0;
  double share = 0;
  std::optional<int64_t> limit;
  std::optional<double> loss;
  std::string label;
};

const char* sql_type(ColumnType type) {
  switch (type) {
    case ColumnType::kInteger:
      return "INTEGER";
    case ColumnType::kReal:
      return "REAL";
    case ColumnType::kText:
      return "TEXT";
  }
  return "?";
}

// A column as PRAGMA table_info describes it.
struct SchemaColumn {
  std::string type;
  bool not_null = false;
  bool has_default = false;
};

std::map<std::string, SchemaColumn> schema_columns(const lrmoe::sqlite::Database& db,
                                                   const std::string& table) {
  lrmoe::sqlite::Statement info =
      db.prepare("SELECT name, type, \"notnull\", dflt_value FROM pragma_table_info(?1)");
  info.bind_text(1, table);
  std::map<std::string, SchemaColumn> columns;
  while (info.step()) {
    columns[info.column_text(0)] = {info.column_text(1), info.column_int64(2) != 0,
                                    !info.column_is_null(3)};
  }
  return columns;
}

// Checks the one row `where` selects from `table`: each column holds the text `expected` gives
// it, as SQLite prints it. A column missing from `expected` fails too: its field is unchecked,
// and might be bound to another column. Compared as one text per row, so a failure shows both.
void check_row(const ResultsStore& store, const std::string& table, const std::string& where,
               std::map<std::string, std::string> expected) {
  const lrmoe::QueryResult result = store.query("SELECT * FROM " + table + " WHERE " + where);
  INFO(table << " WHERE " << where);
  REQUIRE(result.rows.size() == 1);
  std::string actual_text, expected_text;
  for (size_t i = 0; i < result.columns.size(); ++i) {
    const std::string& column = result.columns[i];
    actual_text += column + " = " + result.rows[0][i].value_or("NULL") + "\n";
    const auto wanted = expected.find(column);
    expected_text += column + " = " +
                     (wanted == expected.end() ? "<not checked by this test>" : wanted->second) +
                     "\n";
    if (wanted != expected.end()) expected.erase(wanted);
  }
  for (const auto& [column, value] : expected) {
    actual_text += column + " = <no such column>\n";
    expected_text += column + " = " + value + "\n";
  }
  CHECK(actual_text == expected_text);
}

}  // namespace

TEST_CASE("a column list writes its INSERT and binds the run, then each field in order",
          "[store]") {
  const ColumnList<Sample> columns("samples", {
                                                  {"label", &Sample::label},
                                                  {"count", &Sample::count},
                                                  {"share", &Sample::share},
                                                  {"loss", &Sample::loss},
                                                  {"limit_", &Sample::limit},
                                              });
  CHECK(columns.table() == "samples");
  CHECK(columns.insert_sql() ==
        "INSERT INTO samples (run, label, count, share, loss, limit_) VALUES (?1, ?2, ?3, ?4, ?5, "
        "?6)");
  REQUIRE(columns.columns().size() == 5);
  CHECK(columns.columns()[0].name == "label");
  CHECK(columns.columns()[0].type == ColumnType::kText);
  CHECK(columns.columns()[2].type == ColumnType::kReal);
  CHECK_FALSE(columns.columns()[2].optional);
  CHECK(columns.columns()[4].type == ColumnType::kInteger);
  CHECK(columns.columns()[4].optional);

  TempFolder dir;
  lrmoe::sqlite::Database db(dir.file("columns.db"), lrmoe::sqlite::OpenMode::kReadWriteCreate);
  db.execute(
      "CREATE TABLE samples (run INTEGER, label TEXT, count INTEGER, share REAL, loss REAL, limit_ "
      "INTEGER)");
  lrmoe::sqlite::Statement insert = db.prepare(columns.insert_sql());
  columns.bind(insert, 9, {3, 0.25, 5, 1.5, "five"});
  insert.execute();
  columns.bind(insert, 10, {4, 0.75, std::nullopt, std::nullopt, ""});
  insert.execute();

  lrmoe::sqlite::Statement select =
      db.prepare("SELECT run, label, count, share, loss, limit_ FROM samples ORDER BY run");
  REQUIRE(select.step());
  CHECK(select.column_int64(0) == 9);
  CHECK(select.column_text(1) == "five");
  CHECK(select.column_int64(2) == 3);
  CHECK(select.column_double(3) == 0.25);
  CHECK(select.column_optional_double(4) == 1.5);
  CHECK(select.column_optional_int64(5) == 5);
  REQUIRE(select.step());
  CHECK(select.column_int64(0) == 10);
  CHECK(select.column_text(1).empty());
  CHECK_FALSE(select.column_optional_double(4));  // nullopt binds as NULL
  CHECK_FALSE(select.column_optional_int64(5));
  CHECK_FALSE(select.step());
}

TEST_CASE("every recorded table's column list matches the schema", "[store]") {
  TempFolder dir;
  lrmoe::sqlite::Database db(dir.file("results.db"), lrmoe::sqlite::OpenMode::kReadWriteCreate);
  lrmoe::store::migrate(db, lrmoe::current_schema_version());

  for (const lrmoe::store::TableColumns* list : lrmoe::store::recorded_tables()) {
    const std::string& table = list->table();
    INFO("table " << table);
    const std::map<std::string, SchemaColumn> schema = schema_columns(db, table);
    REQUIRE_FALSE(schema.empty());  // the table exists
    REQUIRE(schema.count("run") == 1);

    std::set<std::string> listed = {"run"};
    for (const lrmoe::store::ColumnDescription& column : list->columns()) {
      INFO("listed column " << column.name);
      CHECK(listed.insert(column.name).second);  // listed once, and never `run`: it is bound first
      const auto in_schema = schema.find(column.name);
      REQUIRE(in_schema != schema.end());
      CHECK(in_schema->second.type == sql_type(column.type));
      // A field that can be empty writes NULL, which a NOT NULL column refuses.
      if (column.optional) CHECK_FALSE(in_schema->second.not_null);
    }
    // Every column an INSERT must fill is listed; the others take their default or NULL.
    for (const auto& [name, column] : schema) {
      INFO("table column " << name);
      if (column.not_null && !column.has_default) CHECK(listed.count(name) == 1);
    }
    CHECK_NOTHROW(db.prepare(list->insert_sql()));
  }
}

TEST_CASE("every field of every recorded table reads back in its own column", "[store]") {
  // Every value differs from every other, so a field bound to another field's column shows.
  lrmoe::StepRecord step;
  step.step = 7;
  step.train_loss = 2.5;
  step.eval_loss = 3.25;
  step.lr = 0.125;
  step.grad_norm = 1.75;
  step.tokens = 4096;
  step.step_seconds = 0.625;
  step.moe_seconds = 0.375;
  step.moe_modeled_seconds = 0.0625;
  step.moe_critical_seconds = 0.03125;

  lrmoe::LayerStepRecord layer;
  layer.step = 7;
  layer.layer = 5;
  layer.pairs_routed = 101;
  layer.pairs_dropped = 102;
  layer.pairs_kept = 103;
  layer.replicas = 104;
  layer.forward_load_max = 105;
  layer.forward_load_mean = 10.5;
  layer.backward_load_max = 106;
  layer.backward_load_mean = 10.25;
  layer.bytes_forward_dispatch = 1001;
  layer.bytes_forward_combine = 1002;
  layer.bytes_backward_dispatch = 1003;
  layer.bytes_backward_return = 1004;
  layer.bytes_replica_sync = 1005;
  layer.bytes_cross_node = 1008;
  layer.forward_seconds = 20.5;
  layer.backward_seconds = 20.25;
  layer.modeled_seconds = 20.125;
  layer.placement_seconds = 30.5;
  layer.metric_seconds = 30.25;
  layer.selection_seconds = 30.125;
  layer.routing_seconds = 30.0625;
  layer.compaction_seconds = 30.75;
  layer.measured_exchange_bytes = 1006;
  layer.measured_exchange_seconds = 40.5;
  layer.measured_parameter_bytes = 1007;
  layer.measured_parameter_seconds = 41.0625;
  layer.critical_path_seconds = 40.25;
  layer.rank_sum_seconds = 40.125;
  layer.modeled_compute_seconds = 40.0625;
  layer.modeled_all_to_all_seconds = 40.75;
  layer.modeled_gather_seconds = 41.5;
  layer.modeled_replica_seconds = 41.25;
  layer.modeled_overlapped_seconds = 41.75;
  layer.modeled_hidden_transfer_seconds = 41.875;
  layer.placement_information = "earlier passes";

  lrmoe::RankMemoryRecord memory =
      lrmoe_test::rank_memory_row(7, 3, {201, 202, 203, 204, 205, 206, 207});
  memory.peak_phase = "backward";
  memory.peak_layer = 208;
  memory.peak_subtotal = 209;
  memory.subtotal_phase = "forward";
  memory.subtotal_layer = 210;
  memory.measured_peak = 211;
  memory.measured_forward_peak = 212;
  memory.measured_backward_peak = 213;
  lrmoe::RankLayerRecord rank_layer{7, 5, 3, 301, 302, 303, 304};
  rank_layer.forward_seconds = 60.5;
  rank_layer.backward_seconds = 60.25;
  const lrmoe::ProcessLayerRecord process_layer{7,     5,      4,   401, 402,     50.5, 403,
                                                50.25, 50.125, 404, 405, 50.0625, 406,  50.03125};

  TempFolder dir;
  const std::string db_path = dir.file("results.db");
  auto writer = ResultsStore::open(db_path);
  const int64_t run = writer->begin_run(lrmoe::RunInfo{});
  const std::string id = std::to_string(run);
  writer->add_step(run, step);
  writer->add_expert_load(run, 7, 5, {11, 13, 17});
  writer->add_layer_step(run, layer);
  writer->add_rank_memory(run, memory);
  writer->add_rank_layer(run, rank_layer);
  writer->add_process_layer(run, process_layer);
  writer->add_event(run, "warning", "the message");
  writer->flush();
  auto reader = ResultsStore::open_read_only(db_path);

  check_row(*reader, "steps", "run = " + id,
            {{"run", id},
             {"step", "7"},
             {"train_loss", "2.5"},
             {"eval_loss", "3.25"},
             {"lr", "0.125"},
             {"grad_norm", "1.75"},
             {"tokens", "4096"},
             {"step_seconds", "0.625"},
             {"moe_seconds", "0.375"},
             {"moe_modeled_seconds", "0.0625"},
             {"moe_critical_seconds", "0.03125"}});
  // The reader maps columns to fields on its own: it reads back the record that was written.
  const std::vector<lrmoe::StepRecord> steps = reader->steps(run);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].step == step.step);
  CHECK(steps[0].train_loss == step.train_loss);
  CHECK(steps[0].eval_loss == step.eval_loss);
  CHECK(steps[0].lr == step.lr);
  CHECK(steps[0].grad_norm == step.grad_norm);
  CHECK(steps[0].tokens == step.tokens);
  CHECK(steps[0].step_seconds == step.step_seconds);
  CHECK(steps[0].moe_seconds == step.moe_seconds);
  CHECK(steps[0].moe_modeled_seconds == step.moe_modeled_seconds);

  check_row(*reader, "expert_load", "expert = 2",
            {{"run", id}, {"step", "7"}, {"layer", "5"}, {"expert", "2"}, {"pairs", "17"}});
  CHECK(reader->query("SELECT * FROM expert_load").rows.size() == 3);

  check_row(*reader, "moe_layer_steps", "run = " + id,
            {{"run", id},
             {"step", "7"},
             {"layer", "5"},
             {"pairs_routed", "101"},
             {"pairs_dropped", "102"},
             {"pairs_kept", "103"},
             {"replicas", "104"},
             {"forward_load_max", "105"},
             {"forward_load_mean", "10.5"},
             {"backward_load_max", "106"},
             {"backward_load_mean", "10.25"},
             {"bytes_forward_dispatch", "1001"},
             {"bytes_forward_combine", "1002"},
             {"bytes_backward_dispatch", "1003"},
             {"bytes_backward_return", "1004"},
             {"bytes_replica_sync", "1005"},
             {"bytes_cross_node", "1008"},
             {"forward_seconds", "20.5"},
             {"backward_seconds", "20.25"},
             {"modeled_seconds", "20.125"},
             {"placement_seconds", "30.5"},
             {"metric_seconds", "30.25"},
             {"selection_seconds", "30.125"},
             {"routing_seconds", "30.0625"},
             {"compaction_seconds", "30.75"},
             {"measured_exchange_bytes", "1006"},
             {"measured_exchange_seconds", "40.5"},
             {"measured_parameter_bytes", "1007"},
             {"measured_parameter_seconds", "41.0625"},
             {"critical_path_seconds", "40.25"},
             {"rank_sum_seconds", "40.125"},
             {"modeled_compute_seconds", "40.0625"},
             {"modeled_all_to_all_seconds", "40.75"},
             {"modeled_gather_seconds", "41.5"},
             {"modeled_replica_seconds", "41.25"},
             {"modeled_overlapped_seconds", "41.75"},
             {"modeled_hidden_transfer_seconds", "41.875"},
             {"placement_information", "earlier passes"}});

  check_row(*reader, "rank_memory", "run = " + id,
            {{"run", id},
             {"step", "7"},
             {"rank", "3"},
             {"owned", "201"},
             {"replicas", "202"},
             {"gradients", "203"},
             {"optimizer", "204"},
             {"forward_tokens", "205"},
             {"backward_tokens", "206"},
             {"dense", "207"},
             {"peak_phase", "backward"},
             {"peak_layer", "208"},
             {"peak_subtotal", "209"},
             {"subtotal_phase", "forward"},
             {"subtotal_layer", "210"},
             {"measured_peak", "211"},
             {"measured_forward_peak", "212"},
             {"measured_backward_peak", "213"}});

  check_row(*reader, "rank_layer_steps", "run = " + id,
            {{"run", id},
             {"step", "7"},
             {"layer", "5"},
             {"rank", "3"},
             {"forward_pairs", "301"},
             {"backward_pairs", "302"},
             {"bytes_sent", "303"},
             {"bytes_received", "304"},
             {"forward_seconds", "60.5"},
             {"backward_seconds", "60.25"}});

  check_row(*reader, "process_layer_steps", "run = " + id,
            {{"run", id},
             {"step", "7"},
             {"layer", "5"},
             {"process", "4"},
             {"bytes_sent", "401"},
             {"bytes_received", "402"},
             {"exchange_seconds", "50.5"},
             {"exchange_calls", "403"},
             {"forward_seconds", "50.25"},
             {"backward_seconds", "50.125"},
             {"parameter_bytes_sent", "404"},
             {"parameter_bytes_received", "405"},
             {"parameter_seconds", "50.0625"},
             {"parameter_calls", "406"},
             {"parameter_blocked_seconds", "50.03125"}});

  // The time is stamped when the event is added; checked for its shape only.
  const std::string time =
      reader->query("SELECT time FROM events").rows.at(0).at(0).value_or("NULL");
  CHECK(std::regex_match(time, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)")));
  check_row(
      *reader, "events", "run = " + id,
      {{"id", "1"}, {"run", id}, {"time", time}, {"level", "warning"}, {"message", "the message"}});
}
