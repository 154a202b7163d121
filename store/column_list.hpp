#pragma once
// One list per recorded table says which field of a record goes into which column. The list
// generates the table's INSERT and binds a record onto it, so a new column is one line in that
// list instead of a column name and a parameter number kept in step by hand in several places.
//
//   const ColumnList<RankLayerRecord> columns("rank_layer_steps", {
//       {"step", &RankLayerRecord::step},
//       {"bytes_sent", &RankLayerRecord::bytes_sent},
//   });
//   sqlite::Statement insert = db.prepare(columns.insert_sql());
//   // INSERT INTO rank_layer_steps (run, step, bytes_sent) VALUES (?1, ?2, ?3)
//   columns.bind(insert, run, record);
//   insert.execute();
//
// Every recorded table belongs to a run, so `run` is always the first column and is not listed.
// Columns read data members only, never getters: a value derived from others is computed where
// the record is filled, so a list stays a plain table of names and fields.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "store/sqlite_handle.hpp"

namespace lrmoe::store {

// How a column's value reaches SQLite; checked against the declared type of the column.
enum class ColumnType { kInteger, kReal, kText };

struct ColumnDescription {
  std::string name;
  ColumnType type;
  bool optional;  // the field is a std::optional: its column must accept NULL
};

// What a column list says without its record type: enough to check it against the schema.
class TableColumns {
 public:
  const std::string& table() const { return table_; }
  // The listed columns in order, without `run`.
  const std::vector<ColumnDescription>& columns() const { return columns_; }

  // "INSERT INTO t (run, a, b) VALUES (?1, ?2, ?3)"
  std::string insert_sql() const {
    std::string names = "run";
    std::string parameters = "?1";
    for (size_t i = 0; i < columns_.size(); ++i) {
      names += ", " + columns_[i].name;
      parameters += ", ?" + std::to_string(i + 2);
    }
    return "INSERT INTO " + table_ + " (" + names + ") VALUES (" + parameters + ")";
  }

 protected:
  TableColumns(std::string table, std::vector<ColumnDescription> columns)
      : table_(std::move(table)), columns_(std::move(columns)) {}

 private:
  std::string table_;
  std::vector<ColumnDescription> columns_;
};

namespace column_list_detail {

// Per field type: the column it needs and how it binds. One specialization per type a column
// can be read from.
template <typename Value>
struct FieldBinding;

template <>
struct FieldBinding<int64_t> {
  static constexpr ColumnType type = ColumnType::kInteger;
  static constexpr bool optional = false;
  static void bind(sqlite::Statement& insert, int index, int64_t value) {
    insert.bind_int64(index, value);
  }
};

template <>
struct FieldBinding<double> {
  static constexpr ColumnType type = ColumnType::kReal;
  static constexpr bool optional = false;
  // NaN binds as NULL (see sqlite::Statement::bind_double).
  static void bind(sqlite::Statement& insert, int index, double value) {
    insert.bind_double(index, value);
  }
};

template <>
struct FieldBinding<std::optional<int64_t>> {
  static constexpr ColumnType type = ColumnType::kInteger;
  static constexpr bool optional = true;
  static void bind(sqlite::Statement& insert, int index, const std::optional<int64_t>& value) {
    insert.bind_optional_int64(index, value);
  }
};

template <>
struct FieldBinding<std::optional<double>> {
  static constexpr ColumnType type = ColumnType::kReal;
  static constexpr bool optional = true;
  static void bind(sqlite::Statement& insert, int index, const std::optional<double>& value) {
    insert.bind_optional_double(index, value);
  }
};

template <>
struct FieldBinding<std::string> {
  static constexpr ColumnType type = ColumnType::kText;
  static constexpr bool optional = false;
  static void bind(sqlite::Statement& insert, int index, const std::string& value) {
    insert.bind_text(index, value);
  }
};

// The FieldBinding of what a pointer to a data member points at.
template <typename MemberPointer>
struct BindingOf;
template <typename Record, typename Value>
struct BindingOf<Value Record::*> {
  using type = FieldBinding<Value>;
};

}  // namespace column_list_detail

template <typename Record>
class ColumnList : public TableColumns {
 public:
  // The field types a column can be read from (see FieldBinding); a field of any other type
  // does not compile.
  using Field = std::variant<int64_t Record::*, double Record::*, std::optional<int64_t> Record::*,
                             std::optional<double> Record::*, std::string Record::*>;

  struct Column {
    const char* name;
    Field field;
  };

  ColumnList(std::string table, std::initializer_list<Column> columns)
      : TableColumns(std::move(table), describe(columns)) {
    fields_.reserve(columns.size());
    for (const Column& column : columns) fields_.push_back(column.field);
  }

  // Binds `run` to ?1 and the listed fields, in order, to ?2, ?3, ... of insert_sql().
  void bind(sqlite::Statement& insert, int64_t run, const Record& record) const {
    insert.bind_int64(1, run);
    for (size_t i = 0; i < fields_.size(); ++i) {
      const int index = static_cast<int>(i) + 2;
      std::visit(
          [&](auto field) {
            using Binding = typename column_list_detail::BindingOf<decltype(field)>::type;
            Binding::bind(insert, index, record.*field);
          },
          fields_[i]);
    }
  }

 private:
  static ColumnDescription describe(const Column& column) {
    return std::visit(
        [&](auto field) {
          using Binding = typename column_list_detail::BindingOf<decltype(field)>::type;
          return ColumnDescription{column.name, Binding::type, Binding::optional};
        },
        column.field);
  }

  static std::vector<ColumnDescription> describe(std::initializer_list<Column> columns) {
    std::vector<ColumnDescription> descriptions;
    descriptions.reserve(columns.size());
    for (const Column& column : columns) descriptions.push_back(describe(column));
    return descriptions;
  }

  std::vector<Field> fields_;
};

}  // namespace lrmoe::store
