// The runs table's columns, declared once. The SELECT that reads a run (run_from), the INSERT
// that writes one (Store::run_create, Store::run_insert) and RunRecord's fields meet in one list;
// a test holds the list against the schema's own columns (PRAGMA table_info(runs)). A column
// added to runs goes into a migration, RunRecord and this list, and kRunColumnCount says so.
// Internal to the store, like sqlite_statement.h.
#pragma once

#include <cstddef>
#include <string>

#include "storage/sqlite_statement.h"
#include "storage/store.h"

namespace tfw::detail {

struct RunColumn {
  const char* name;                                             // the column of runs
  void (*read)(Statement& s, int column, RunRecord& run);       // from a SELECT's column
  void (*bind)(Statement& s, int index, const RunRecord& run);  // into an INSERT's parameter
};

// 0 is NULL: a run that has not ended, a run without a parent.
template <typename T>
void bind_or_null(Statement& s, int index, T v) {
  if (v != 0) {
    s.bind(index, v);
  } else {
    s.bind_null(index);
  }
}

// Every column of runs but id and experiment_id (read through the join as the experiment's
// name, written as its id), in the schema's order.
inline constexpr RunColumn kRunColumns[] = {
    {"name", [](Statement& s, int c, RunRecord& r) { r.name = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.name); }},
    {"family", [](Statement& s, int c, RunRecord& r) { r.family = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.family); }},
    {"config", [](Statement& s, int c, RunRecord& r) { r.config = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.config); }},
    {"status",  // the schema CHECKs the names
     [](Statement& s, int c, RunRecord& r) { r.status = run_status_parse(s.text(c)).value_or(RunStatus::failed); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, std::string(status_name(r.status))); }},
    {"heartbeat", [](Statement& s, int c, RunRecord& r) { r.heartbeat = s.real(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.heartbeat); }},
    {"seed", [](Statement& s, int c, RunRecord& r) { r.seed = s.integer(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.seed); }},
    {"git_commit", [](Statement& s, int c, RunRecord& r) { r.git_commit = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.git_commit); }},
    {"host", [](Statement& s, int c, RunRecord& r) { r.host = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.host); }},
    {"started", [](Statement& s, int c, RunRecord& r) { r.started = s.real(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.started); }},
    {"ended", [](Statement& s, int c, RunRecord& r) { r.ended = s.real(c); },
     [](Statement& s, int i, const RunRecord& r) { bind_or_null(s, i, r.ended); }},
    {"parent_run_id", [](Statement& s, int c, RunRecord& r) { r.parent = s.integer(c); },
     [](Statement& s, int i, const RunRecord& r) { bind_or_null(s, i, r.parent); }},
    {"growth_method", [](Statement& s, int c, RunRecord& r) { r.growth_method = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.growth_method); }},
    {"growth_options", [](Statement& s, int c, RunRecord& r) { r.growth_options = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.growth_options); }},
    {"stage", [](Statement& s, int c, RunRecord& r) { r.stage = s.integer(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.stage); }},
    {"parameters", [](Statement& s, int c, RunRecord& r) { r.parameters = s.integer(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.parameters); }},
    {"tokens", [](Statement& s, int c, RunRecord& r) { r.tokens = s.integer(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.tokens); }},
    {"flops", [](Statement& s, int c, RunRecord& r) { r.flops = s.real(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.flops); }},
    {"inherited_flops", [](Statement& s, int c, RunRecord& r) { r.inherited_flops = s.real(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.inherited_flops); }},
    {"cumulative_flops", [](Statement& s, int c, RunRecord& r) { r.cumulative_flops = s.real(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.cumulative_flops); }},
    {"final_metrics", [](Statement& s, int c, RunRecord& r) { r.final_metrics = FinalMetrics::from_text(s.text(c)); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.final_metrics.text()); }},
    {"error", [](Statement& s, int c, RunRecord& r) { r.error = s.text(c); },
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.error); }},
    {"run_dir", [](Statement& s, int c, RunRecord& r) { r.run_dir = s.text(c); },  // as stored (Store::resolved)
     [](Statement& s, int i, const RunRecord& r) { s.bind(i, r.run_dir); }},
};
inline constexpr std::size_t kRunColumnCount = 22;  // runs has 24 columns: id, experiment_id and these
static_assert(sizeof(kRunColumns) / sizeof(kRunColumns[0]) == kRunColumnCount,
              "a column of runs was added or dropped: change the migration, RunRecord and kRunColumns together");

// "r.id, e.name, r.name, r.family, ...": a run read through `runs r JOIN experiments e`
// (run_read). Made once.
inline const std::string& run_select_columns() {
  static const std::string columns = [] {
    std::string out = "r.id, e.name";
    for (const RunColumn& column : kRunColumns) out += std::string(", r.") + column.name;
    return out;
  }();
  return columns;
}

// Reads a row of a SELECT of run_select_columns() into `run`.
inline void run_read(Statement& s, RunRecord& run) {
  run.id = s.integer(0);
  run.experiment = s.text(1);
  for (std::size_t i = 0; i < kRunColumnCount; ++i) kRunColumns[i].read(s, static_cast<int>(i) + 2, run);
}

// "INSERT INTO runs (experiment_id, name, ...) VALUES (?, ?, ...)": the experiment's id at 1,
// kRunColumns[i] at i + 2 (run_bind). Made once.
inline const std::string& run_insert_sql() {
  static const std::string sql = [] {
    std::string names = "experiment_id", values = "?";
    for (const RunColumn& column : kRunColumns) {
      names += std::string(", ") + column.name;
      values += ", ?";
    }
    return "INSERT INTO runs (" + names + ") VALUES (" + values + ")";
  }();
  return sql;
}

// Binds run_insert_sql()'s parameters: `row` (its run_dir as stored) under `experiment`.
inline void run_bind(Statement& s, std::int64_t experiment, const RunRecord& row) {
  s.bind(1, experiment);
  for (std::size_t i = 0; i < kRunColumnCount; ++i) kRunColumns[i].bind(s, static_cast<int>(i) + 2, row);
}

}  // namespace tfw::detail
