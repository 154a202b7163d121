#pragma once
// RAII ownership of an SQLite connection, its prepared statements and its transactions. Every
// failure becomes a one-line StoreError that names the database file, carries SQLite's own
// message and, where the cause is one a user can fix, says what to do.
//
// Not thread-safe: a connection and its statements belong to one thread at a time.

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/results_store.hpp"

namespace lrmoe::sqlite {

enum class OpenMode {
  kReadWriteCreate,  // creates the file if it is missing
  kReadOnly,         // the file must exist; nothing is ever written to it
  // Read-only, and the file cannot change while open (SQLite's immutable=1): no locks, no -shm
  // file, which a WAL database otherwise needs even to be read. For files on read-only mounts.
  kImmutable,
};

class Statement;

class Database {
 public:
  Database(const std::string& path, OpenMode mode);
  ~Database();
  // Not movable: statements point back at their connection for error messages.
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

  // Runs SQL that may hold several statements and returns no rows (schema, pragmas).
  void execute(const std::string& sql, std::string_view context = {});
  // Prepares the first statement of `sql`; `rest`, when given, receives the text after it.
  // SQL holding only whitespace or comments gives a statement whose handle() is null.
  Statement prepare(std::string_view sql, std::string_view* rest = nullptr) const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t changes() const;
  int64_t last_insert_rowid() const;

  // The error SQLite reports for the last failed call on this connection, as a StoreError:
  // "results database '<path>': <context>: <SQLite message>; <what to do>".
  StoreError error(std::string_view context = {}) const;
  // The same shape for a problem found by us rather than by SQLite.
  StoreError error_with_message(std::string_view message) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// A prepared statement; it must not outlive its Database. Parameter and column indexes follow
// SQLite: parameters from 1, columns from 0. A failed step() resets the statement, so it can be
// reused after the error.
class Statement {
 public:
  Statement(const Database& db, sqlite3_stmt* stmt);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  sqlite3_stmt* handle() const { return stmt_; }

  Statement& bind_int64(int index, int64_t value);
  // NaN binds as NULL: SQLite has no NaN and stores it as NULL itself.
  Statement& bind_double(int index, double value);
  Statement& bind_optional_double(int index, const std::optional<double>& value);
  Statement& bind_optional_int64(int index, const std::optional<int64_t>& value);
  Statement& bind_text(int index, std::string_view value);
  Statement& bind_optional_text(int index, const std::optional<std::string>& value);
  Statement& bind_null(int index);

  // Advances the statement: true while a row is available, false when it is done.
  bool step();
  // Makes the statement ready to run again with fresh parameters.
  void reset();
  // Runs a statement that returns no rows (INSERT, UPDATE), then reset().
  void execute();

  int column_count() const;
  std::string column_name(int column) const;
  bool column_is_null(int column) const;
  int64_t column_int64(int column) const;
  // NULL reads as NaN: a non-optional REAL column holds NULL only where NaN was written.
  double column_double(int column) const;
  std::optional<double> column_optional_double(int column) const;
  std::optional<int64_t> column_optional_int64(int column) const;
  std::string column_text(int column) const;
  std::optional<std::string> column_optional_text(int column) const;

 private:
  void check_bind(int rc, int index);

  const Database* db_;
  sqlite3_stmt* stmt_;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted. IMMEDIATE takes the write
// lock up front, so a busy database makes us wait (busy timeout) here instead of failing
// half-way through the transaction.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  Database& db_;
  bool open_ = true;
};

}  // namespace lrmoe::sqlite
