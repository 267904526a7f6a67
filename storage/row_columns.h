// A table's columns as one list of (name, how a row reads it), for the tables whose classes
// live with their layers (the service's jobs, the cluster's jobs): the SELECT's column list
// and the reading of a row both walk the list, so a column is named once. A NULL leaves the
// row's field at the struct's default (an exit code of -1, a time of 0). The runs table has
// its own list, which also writes (run_columns.h), as has evaluations (evaluations.cpp).
// Internal to the store's users, like sqlite_statement.h.
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
  return {name, [](Statement& s, int c, Row& row) {
            if constexpr (std::is_same_v<T, std::string>) {
              row.*Member = s.text(c);
            } else if constexpr (std::is_same_v<T, double>) {
              row.*Member = s.real(c);
            } else {
              static_assert(std::is_same_v<T, std::int64_t>, "a column is text, an integer or a real");
              row.*Member = s.integer(c);
            }
          }};
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

// The current row of a SELECT made by select_columns.
template <typename Row, std::size_t N>
Row row_read(Statement& s, const RowColumn<Row> (&columns)[N]) {
  Row row;
  for (std::size_t i = 0; i < N; ++i) {
    if (!s.is_null(static_cast<int>(i))) columns[i].read(s, static_cast<int>(i), row);
  }
  return row;
}

}  // namespace tfw::detail
