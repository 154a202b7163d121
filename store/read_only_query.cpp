#include "store/read_only_query.hpp"

#include <fmt/format.h>

#include <chrono>
#include <new>
#include <string_view>

namespace lrmoe::store {
namespace {

// Whether SQL text holds a statement, rather than only whitespace, semicolons and comments.
// SQLite's own parser decides, so that comments of every form are understood.
bool holds_a_statement(const sqlite::Database& db, std::string_view sql) {
  while (!sql.empty()) {
    const sqlite::Statement next = db.prepare(sql, &sql);
    if (next.handle()) return true;
  }
  return false;
}

std::string blob_literal(const sqlite::Statement& statement, int column) {
  const auto* bytes =
      static_cast<const unsigned char*>(sqlite3_column_blob(statement.handle(), column));
  const int size = sqlite3_column_bytes(statement.handle(), column);
  if (!bytes && size > 0) throw std::bad_alloc();  // SQLite could not hold the blob
  std::string literal = "X'";
  for (int i = 0; i < size; ++i) literal += fmt::format("{:02X}", bytes[i]);
  return literal + "'";
}

std::optional<std::string> cell_text(const sqlite::Statement& statement, int column) {
  if (sqlite3_column_type(statement.handle(), column) == SQLITE_BLOB) {
    return blob_literal(statement, column);
  }
  return statement.column_optional_text(column);
}

// While a statement runs: its deadline and stop request, polled by SQLite's progress handler,
// and SQLite's heap bound; both undone when the statement ends.
class Bounded {
 public:
  Bounded(const sqlite::Database& db, const QueryLimits& limits) : db_(db), limits_(limits) {
    if (limits.seconds > 0) {
      deadline_ = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(limits.seconds));
    }
    if (limits.seconds > 0 || limits.stop_requested)
      sqlite3_progress_handler(db.handle(), kInstructionsPerPoll, &Bounded::poll, this);
    if (limits.bytes > 0) previous_heap_limit_ = sqlite3_hard_heap_limit64(limits.bytes);
  }
  ~Bounded() {
    sqlite3_progress_handler(db_.handle(), 0, nullptr, nullptr);
    if (limits_.bytes > 0) sqlite3_hard_heap_limit64(previous_heap_limit_);
  }
  Bounded(const Bounded&) = delete;
  Bounded& operator=(const Bounded&) = delete;

  // A StoreError of a step as the bound it met says it, or as it was.
  StoreError explain(const StoreError& failure) const {
    if (timed_out_)
      return db_.error_with_message(fmt::format(
          "the query ran past its time limit of {} s (lrmoe query --timeout); narrow it with "
          "WHERE or LIMIT, or give it more time",
          limits_.seconds));
    if (stopped_) return db_.error_with_message("the query was stopped (Ctrl-C or SIGTERM)");
    if (limits_.bytes > 0 && sqlite3_errcode(db_.handle()) == SQLITE_NOMEM) return too_large();
    return failure;
  }

  StoreError too_large() const {
    return db_.error_with_message(fmt::format(
        "the query needs more than its memory limit of {} MiB (lrmoe query --max-memory); "
        "narrow it with WHERE or LIMIT, or raise the limit",
        limits_.bytes >> 20));
  }

 private:
  // SQLite virtual-machine instructions between polls: a few microseconds.
  static constexpr int kInstructionsPerPoll = 10000;

  static int poll(void* self) {
    auto* bounded = static_cast<Bounded*>(self);
    if (bounded->limits_.stop_requested && bounded->limits_.stop_requested())
      bounded->stopped_ = true;
    else if (bounded->limits_.seconds > 0 && std::chrono::steady_clock::now() > bounded->deadline_)
      bounded->timed_out_ = true;
    return bounded->stopped_ || bounded->timed_out_ ? 1 : 0;
  }

  const sqlite::Database& db_;
  QueryLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  int64_t previous_heap_limit_ = 0;
  bool timed_out_ = false;
  bool stopped_ = false;
};

}  // namespace

QueryResult run_read_only_query(const sqlite::Database& db, const std::string& sql,
                                const QueryLimits& limits) {
  std::string_view rest;
  sqlite::Statement statement = db.prepare(sql, &rest);
  if (!statement.handle()) {
    throw db.error_with_message("the query is empty; give one SELECT statement");
  }
  if (holds_a_statement(db, rest)) {
    throw db.error_with_message(
        "the query holds more than one statement; give exactly one (no ';' between "
        "statements)");
  }
  if (!sqlite3_stmt_readonly(statement.handle())) {
    throw db.error_with_message(
        "only read-only statements (SELECT, WITH, EXPLAIN, reading PRAGMAs) are allowed; "
        "`lrmoe query` never changes the database");
  }

  QueryResult result;
  for (int column = 0; column < statement.column_count(); ++column) {
    result.columns.push_back(statement.column_name(column));
  }
  const Bounded bounded(db, limits);
  int64_t answer_bytes = 0;
  try {
    while (statement.step()) {
      auto& row = result.rows.emplace_back();
      for (int column = 0; column < statement.column_count(); ++column) {
        row.push_back(cell_text(statement, column));
        answer_bytes += row.back() ? static_cast<int64_t>(row.back()->size()) : 0;
      }
      if (limits.bytes > 0 && answer_bytes > limits.bytes) throw bounded.too_large();
    }
  } catch (const std::bad_alloc&) {
    throw bounded.too_large();
  } catch (const StoreError& failure) {
    throw bounded.explain(failure);
  }
  return result;
}

}  // namespace lrmoe::store
