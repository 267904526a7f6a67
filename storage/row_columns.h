// A table's columns as one list of (name, how a row reads it, how a row is written into it),
// for the service's jobs, the cluster's jobs and the evaluations: the SELECT's column list,
// the reading of a row and, where a table is written through its list, the INSERT all walk
// it, so a column is named once. A NULL leaves the row's field as the row started (the
// struct's default: an exit code of -1, a time of 0). The runs table has its own list, which
// reads through a join (run_columns.h). Internal to the store's users, like sqlite_statement.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "storage/sqlite_statement.h"

namespace tfw::detail {

template <typename Row>
struct RowColumn {
  const char* name;
  void (*read)(Statement& s, int column, Row& row);
  // Into an INSERT's parameter; null for a column the database fills (an id).
  void (*bind)(Statement& s, int parameter, const Row& row) = nullptr;
};

template <typename T>
struct MemberOf;
template <typename Row, typename T>
struct MemberOf<T Row::*> {
  using row = Row;
  using type = T;
};

// The column `name` read into `Member` as its type asks: text, an integer or a real.
template <auto Member>
constexpr RowColumn<typename MemberOf<decltype(Member)>::row> column(const char* name) {
  using Row = typename MemberOf<decltype(Member)>::row;
  using T = typename MemberOf<decltype(Member)>::type;
  return {name,
          [](Statement& s, int c, Row& row) {
            if constexpr (std::is_same_v<T, std::string>) {
              row.*Member = s.text(c);
            } else if constexpr (std::is_same_v<T, double>) {
              row.*Member = s.real(c);
            } else {
              static_assert(std::is_same_v<T, std::int64_t>, "a column is text, an integer or a real");
              row.*Member = s.integer(c);
            }
          },
          [](Statement& s, int i, const Row& row) { s.bind(i, row.*Member); }};
}

// "SELECT a, b, ... FROM table".
template <typename Row, std::size_t N>
std::string select_columns(const RowColumn<Row> (&columns)[N], const char* table) {
  std::string sql = "SELECT ";
  for (std::size_t i = 0; i < N; ++i) sql += (i > 0 ? ", " : "") + std::string(columns[i].name);
  return sql + " FROM " + table;
}

// The columns' names, in order (for the tests that hold a list to the schema).
template <typename Row, std::size_t N>
std::vector<std::string> column_names(const RowColumn<Row> (&columns)[N]) {
  std::vector<std::string> names;
  for (const RowColumn<Row>& column : columns) names.emplace_back(column.name);
  return names;
}

// "INSERT INTO table (a, b, ...) VALUES (?1, ?2, ...)" over the columns that are written.
template <typename Row, std::size_t N>
std::string insert_columns(const RowColumn<Row> (&columns)[N], const char* table) {
  std::string names, parameters;
  int written = 0;
  for (const RowColumn<Row>& column : columns) {
    if (column.bind == nullptr) continue;
    ++written;
    names += (written > 1 ? ", " : "") + std::string(column.name);
    parameters += (written > 1 ? ", ?" : "?") + std::to_string(written);
  }
  return "INSERT INTO " + std::string(table) + " (" + names + ") VALUES (" + parameters + ")";
}

// Binds `row` into an INSERT made by insert_columns.
template <typename Row, std::size_t N>
void row_bind(Statement& s, const RowColumn<Row> (&columns)[N], const Row& row) {
  int parameter = 0;
  for (const RowColumn<Row>& column : columns) {
    if (column.bind != nullptr) column.bind(s, ++parameter, row);
  }
}

// The current row of a SELECT made by select_columns, read into `row` (a NULL keeps its field).
template <typename Row, std::size_t N>
Row row_read(Statement& s, const RowColumn<Row> (&columns)[N], Row row = Row()) {
  for (std::size_t i = 0; i < N; ++i) {
    if (!s.is_null(static_cast<int>(i))) columns[i].read(s, static_cast<int>(i), row);
  }
  return row;
}

}  // namespace tfw::detail
