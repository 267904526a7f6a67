// `tfw eval` results in the store: one row per metric of a checkpoint evaluated on a corpus.
// See store.h.
#include <sqlite3.h>

#include <cmath>

#include "storage/sqlite_statement.h"
#include "storage/store.h"

namespace tfw {

using detail::Statement;

void Store::evaluations_add(const std::vector<EvaluationRow>& rows) {
  if (rows.empty()) return;
  // A row's own `created` where it has one (an imported run keeps its evaluations' times), now
  // otherwise. Inside the caller's transaction when there is one (tfw runs import).
  auto insert = [&] {
    for (const EvaluationRow& row : rows) {
      Statement s(db_,
                  "INSERT INTO evaluations (run_id, checkpoint, step, corpus, metric, value, windows, tokens, mode, "
                  "created, blocks) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
      if (row.run > 0) s.bind(1, row.run);
      s.bind(2, row.checkpoint).bind(3, row.step).bind(4, row.corpus).bind(5, row.metric);
      if (std::isfinite(row.value)) s.bind(6, row.value);
      s.bind(7, row.windows).bind(8, row.tokens).bind(9, row.mode);
      s.bind(10, row.created > 0 ? row.created : store_now()).bind(11, row.blocks);
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
  Statement s(db_,
              "SELECT id, run_id, checkpoint, step, corpus, metric, value, windows, tokens, mode, created, blocks "
              "FROM evaluations WHERE ?1 = 0 OR run_id = ?1 ORDER BY id");
  s.bind(1, run);
  std::vector<EvaluationRow> out;
  while (s.step()) {
    EvaluationRow row;
    row.id = s.integer(0);
    row.run = s.is_null(1) ? 0 : s.integer(1);
    row.checkpoint = s.text(2);
    row.step = s.integer(3);
    row.corpus = s.text(4);
    row.metric = s.text(5);
    row.value = s.is_null(6) ? std::nan("") : s.real(6);
    row.windows = s.integer(7);
    row.tokens = s.integer(8);
    row.mode = s.text(9);
    row.created = s.real(10);
    row.blocks = s.text(11);
    out.push_back(row);
  }
  return out;
}

}  // namespace tfw
