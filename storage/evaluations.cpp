// `tfw eval` results in the store: one row per metric of a checkpoint evaluated on a corpus.
// See store.h.
#include <sqlite3.h>

#include <cmath>
#include <string>
#include <vector>

#include "storage/row_columns.h"
#include "storage/sqlite_statement.h"
#include "storage/store.h"

namespace tfw {

using detail::Statement;

namespace {

// The columns of evaluations, in the schema's order (a test holds them to it), each with how a
// row is read from it and written into it. `id` is the database's: read, never written.
struct EvaluationColumn {
  const char* name;
  void (*read)(Statement& s, int column, EvaluationRow& row);
  void (*write)(Statement& s, int parameter, const EvaluationRow& row);  // null for id
};

template <auto Member>
constexpr EvaluationColumn plain(const char* name) {
  return {name, [](Statement& s, int c, EvaluationRow& row) { detail::column<Member>("").read(s, c, row); },
          [](Statement& s, int i, const EvaluationRow& row) { s.bind(i, row.*Member); }};
}

const EvaluationColumn kEvaluationColumns[] = {
    {"id", [](Statement& s, int c, EvaluationRow& row) { row.id = s.integer(c); }, nullptr},
    // 0 for a checkpoint the store does not know, stored as NULL.
    {"run_id", [](Statement& s, int c, EvaluationRow& row) { row.run = s.is_null(c) ? 0 : s.integer(c); },
     [](Statement& s, int i, const EvaluationRow& row) {
       if (row.run > 0) s.bind(i, row.run);
     }},
    plain<&EvaluationRow::checkpoint>("checkpoint"),
    plain<&EvaluationRow::step>("step"),
    plain<&EvaluationRow::corpus>("corpus"),
    plain<&EvaluationRow::metric>("metric"),
    // NaN (a metric with no value) stored as NULL.
    {"value", [](Statement& s, int c, EvaluationRow& row) { row.value = s.is_null(c) ? std::nan("") : s.real(c); },
     [](Statement& s, int i, const EvaluationRow& row) {
       if (std::isfinite(row.value)) s.bind(i, row.value);
     }},
    plain<&EvaluationRow::windows>("windows"),
    plain<&EvaluationRow::tokens>("tokens"),
    plain<&EvaluationRow::mode>("mode"),
    // A row's own time where it has one (an imported run keeps its evaluations' times), now otherwise.
    {"created", [](Statement& s, int c, EvaluationRow& row) { row.created = s.real(c); },
     [](Statement& s, int i, const EvaluationRow& row) { s.bind(i, row.created > 0 ? row.created : store_now()); }},
    plain<&EvaluationRow::blocks>("blocks"),
};

std::string insert_sql() {
  std::string names, parameters;
  int i = 0;
  for (const EvaluationColumn& column : kEvaluationColumns) {
    if (column.write == nullptr) continue;
    names += (i > 0 ? ", " : "") + std::string(column.name);
    parameters += (i > 0 ? ", ?" : "?") + std::to_string(i + 1);
    ++i;
  }
  return "INSERT INTO evaluations (" + names + ") VALUES (" + parameters + ")";
}

std::string select_sql() {
  std::string sql = "SELECT ";
  int i = 0;
  for (const EvaluationColumn& column : kEvaluationColumns) sql += (i++ > 0 ? ", " : "") + std::string(column.name);
  return sql + " FROM evaluations";
}

}  // namespace

std::vector<std::string> Store::evaluation_columns() {
  std::vector<std::string> names;
  for (const EvaluationColumn& column : kEvaluationColumns) names.emplace_back(column.name);
  return names;
}

void Store::evaluations_add(const std::vector<EvaluationRow>& rows) {
  if (rows.empty()) return;
  // Inside the caller's transaction when there is one (tfw runs import).
  auto insert = [&] {
    const std::string sql = insert_sql();
    for (const EvaluationRow& row : rows) {
      Statement s(db_, sql.c_str());
      int i = 0;
      for (const EvaluationColumn& column : kEvaluationColumns) {
        if (column.write != nullptr) column.write(s, ++i, row);
      }
      s.step();
    }
  };
  if (sqlite3_get_autocommit(db_) == 0) {
    insert();
  } else {
    transaction(insert);
  }
}

std::vector<EvaluationRow> Store::evaluations(std::int64_t run) {
  Statement s(db_, (select_sql() + " WHERE ?1 = 0 OR run_id = ?1 ORDER BY id").c_str());
  s.bind(1, run);
  std::vector<EvaluationRow> out;
  while (s.step()) {
    EvaluationRow row;
    int c = 0;
    for (const EvaluationColumn& column : kEvaluationColumns) {
      column.read(s, c, row);
      ++c;
    }
    out.push_back(row);
  }
  return out;
}

}  // namespace tfw
