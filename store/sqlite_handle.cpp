#include "store/sqlite_handle.hpp"

#include <fmt/format.h>

#include <limits>
#include <utility>

namespace lrmoe::sqlite {
namespace {

// What a user can do about the errors they can cause; empty where only a bug can cause it.
std::string_view remedy_for(int primary_code) {
  switch (primary_code) {
    case SQLITE_CANTOPEN:
      return "check that the folder exists and that the path is a writable file, or pass "
             "another --db path";
    case SQLITE_NOTADB:
      return "it was left untouched; pass another --db path";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return "check the file's permissions or pass another --db path";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "another process held the database locked too long (a reader waits 5 s, a writer "
             "120 s); find it with `fuser` on the file and try again";
    case SQLITE_FULL:
      return "the disk is full; free some space";
    case SQLITE_IOERR:
    case SQLITE_CORRUPT:
      return "check the file and its disk, or pass another --db path";
    default:
      return {};
  }
}

std::string describe(std::string_view path, std::string_view context, std::string_view message,
                     std::string_view remedy) {
  std::string text = fmt::format("results database '{}': ", path);
  if (!context.empty()) text += fmt::format("{}: ", context);
  text += message;
  if (!remedy.empty()) text += fmt::format("; {}", remedy);
  return text;
}

// "file:PATH?immutable=1", with the characters a URI path may not hold as themselves escaped.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

Database::Database(const std::string& path, OpenMode mode) : path_(path) {
  const int flags = mode == OpenMode::kReadWriteCreate ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                    : mode == OpenMode::kReadOnly      ? SQLITE_OPEN_READONLY
                                                       : SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
  const std::string name = mode == OpenMode::kImmutable ? immutable_uri(path) : path;
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // SQLite hands back a connection even when opening fails; it only carries the message.
    const StoreError failure =
        db_ ? error("cannot open")
            : StoreError(describe(path, "cannot open", sqlite3_errstr(rc), remedy_for(rc & 0xff)));
    sqlite3_close(db_);
    db_ = nullptr;
    throw failure;
  }
  sqlite3_extended_result_codes(db_, 1);
}

Database::~Database() {
  // close_v2 tolerates statements that are still alive: it closes once they are finalized.
  sqlite3_close_v2(db_);
}

void Database::execute(const std::string& sql, std::string_view context) {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw error(context);
  }
}

Statement Database::prepare(std::string_view sql, std::string_view* rest) const {
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, &tail) !=
      SQLITE_OK) {
    throw error();
  }
  if (rest) *rest = sql.substr(static_cast<size_t>(tail - sql.data()));
  return Statement(*this, stmt);
}

int64_t Database::changes() const {
  return sqlite3_changes64(db_);
}

int64_t Database::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

StoreError Database::error(std::string_view context) const {
  const int code = sqlite3_extended_errcode(db_);
  return StoreError(describe(path_, context, sqlite3_errmsg(db_), remedy_for(code & 0xff)));
}

StoreError Database::error_with_message(std::string_view message) const {
  return StoreError(describe(path_, {}, message, {}));
}

Statement::Statement(const Database& db, sqlite3_stmt* stmt) : db_(&db), stmt_(stmt) {}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

void Statement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) throw db_->error(fmt::format("binding parameter {}", index));
}

Statement& Statement::bind_int64(int index, int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind_double(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind_optional_double(int index, const std::optional<double>& value) {
  return value ? bind_double(index, *value) : bind_null(index);
}

Statement& Statement::bind_optional_int64(int index, const std::optional<int64_t>& value) {
  return value ? bind_int64(index, *value) : bind_null(index);
}

Statement& Statement::bind_optional_text(int index, const std::optional<std::string>& value) {
  return value ? bind_text(index, *value) : bind_null(index);
}

Statement& Statement::bind_text(int index, std::string_view value) {
  check_bind(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
  return *this;
}

Statement& Statement::bind_null(int index) {
  check_bind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  StoreError failure = db_->error();
  sqlite3_reset(stmt_);
  throw failure;
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void Statement::execute() {
  step();
  reset();
}

int Statement::column_count() const {
  return sqlite3_column_count(stmt_);
}

std::string Statement::column_name(int column) const {
  const char* name = sqlite3_column_name(stmt_, column);
  return name ? name : "";
}

bool Statement::column_is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::column_int64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double Statement::column_double(int column) const {
  return column_is_null(column) ? std::numeric_limits<double>::quiet_NaN()
                                : sqlite3_column_double(stmt_, column);
}

std::optional<double> Statement::column_optional_double(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return sqlite3_column_double(stmt_, column);
}

std::optional<int64_t> Statement::column_optional_int64(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return sqlite3_column_int64(stmt_, column);
}

std::string Statement::column_text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  // The byte count is read after the text: that is the order SQLite documents as safe.
  const int bytes = sqlite3_column_bytes(stmt_, column);
  return text ? std::string(text, static_cast<size_t>(bytes)) : std::string();
}

std::optional<std::string> Statement::column_optional_text(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_text(column);
}

Transaction::Transaction(Database& db) : db_(db) {
  db_.execute("BEGIN IMMEDIATE", "starting a transaction");
}

Transaction::~Transaction() {
  // The failure being unwound is the one worth reporting; a failed rollback adds nothing.
  if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.execute("COMMIT", "committing");
  open_ = false;
}

}  // namespace lrmoe::sqlite
