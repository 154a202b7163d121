#include "store/read_only_query.hpp"

#include <fmt/format.h>

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

}  // namespace

QueryResult run_read_only_query(const sqlite::Database& db, const std::string& sql) {
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
  while (statement.step()) {
    auto& row = result.rows.emplace_back();
    for (int column = 0; column < statement.column_count(); ++column) {
      row.push_back(cell_text(statement, column));
    }
  }
  return result;
}

}  // namespace lrmoe::store
