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

using Column = detail::RowColumn<EvaluationRow>;

// The columns of evaluations, in the schema's order (a test holds them to it). `id` is the
// database's: read, never written.
const Column kEvaluationColumns[] = {
    {"id", detail::column<&EvaluationRow::id>("id").read, nullptr},
    // A checkpoint the store does not know (run 0) is stored as NULL.
    {"run_id", detail::column<&EvaluationRow::run>("run_id").read,
     [](Statement& s, int i, const EvaluationRow& row) {
       if (row.run > 0) s.bind(i, row.run);
     }},
    detail::column<&EvaluationRow::checkpoint>("checkpoint"),
    detail::column<&EvaluationRow::step>("step"),
    detail::column<&EvaluationRow::corpus>("corpus"),
    detail::column<&EvaluationRow::metric>("metric"),
    // A metric without a value (NaN) is stored as NULL, and read back as NaN (unread).
    {"value", detail::column<&EvaluationRow::value>("value").read,
     [](Statement& s, int i, const EvaluationRow& row) {
       if (std::isfinite(row.value)) s.bind(i, row.value);
     }},
    detail::column<&EvaluationRow::windows>("windows"),
    detail::column<&EvaluationRow::tokens>("tokens"),
    detail::column<&EvaluationRow::mode>("mode"),
    // A row's own time where it has one (an imported run keeps its evaluations' times), now otherwise.
    {"created", detail::column<&EvaluationRow::created>("created").read,
     [](Statement& s, int i, const EvaluationRow& row) { s.bind(i, row.created > 0 ? row.created : store_now()); }},
    detail::column<&EvaluationRow::blocks>("blocks"),
};

// What a row holds before a SELECT's columns are read into it: a NULL value stays NaN.
EvaluationRow unread() {
  EvaluationRow row;
  row.value = std::nan("");
  return row;
}

}  // namespace

std::vector<std::string> Store::evaluation_columns() { return detail::column_names(kEvaluationColumns); }

void Store::evaluations_add(const std::vector<EvaluationRow>& rows) {
  if (rows.empty()) return;
  // Inside the caller's transaction when there is one (tfw runs import).
  auto insert = [&] {
    const std::string sql = detail::insert_columns(kEvaluationColumns, "evaluations");
    for (const EvaluationRow& row : rows) {
      Statement s(db_, sql.c_str());
      detail::row_bind(s, kEvaluationColumns, row);
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
  const std::string sql =
      detail::select_columns(kEvaluationColumns, "evaluations") + " WHERE ?1 = 0 OR run_id = ?1 ORDER BY id";
  Statement s(db_, sql.c_str());
  s.bind(1, run);
  std::vector<EvaluationRow> out;
  while (s.step()) out.push_back(detail::row_read(s, kEvaluationColumns, unread()));
  return out;
}

}  // namespace tfw
