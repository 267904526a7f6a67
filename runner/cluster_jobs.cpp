// See cluster_jobs.h.
#include "runner/cluster_jobs.h"

#include <sqlite3.h>

#include "storage/row_columns.h"
#include "storage/sqlite_statement.h"

namespace tfw::runner {

using detail::Statement;

namespace {

// The columns of cluster_jobs, in the schema's order (a test holds them to it).
const detail::RowColumn<ClusterJobRow> kClusterColumns[] = {
    detail::column<&ClusterJobRow::id>("id"),
    detail::column<&ClusterJobRow::experiment>("experiment"),
    detail::column<&ClusterJobRow::run>("run"),
    detail::column<&ClusterJobRow::scheduler>("scheduler"),
    detail::column<&ClusterJobRow::job_id>("job_id"),
    detail::column<&ClusterJobRow::state>("state"),
    detail::column<&ClusterJobRow::script>("script"),
    detail::column<&ClusterJobRow::log>("log"),
    detail::column<&ClusterJobRow::submitted>("submitted"),
    detail::column<&ClusterJobRow::updated>("updated"),
    detail::column<&ClusterJobRow::exit_code>("exit_code"),
    detail::column<&ClusterJobRow::reason>("reason"),
};

}  // namespace

std::vector<std::string> ClusterJobs::columns() { return detail::column_names(kClusterColumns); }

std::int64_t ClusterJobs::add(const ClusterJobRow& job) {
  sqlite3* db = store_.connection();
  Statement s(db,
              "INSERT INTO cluster_jobs (experiment, run, scheduler, job_id, state, script, log, submitted, updated, "
              "reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)");
  s.bind(1, job.experiment).bind(2, job.run).bind(3, job.scheduler).bind(4, job.job_id).bind(5, job.state);
  s.bind(6, job.script).bind(7, job.log).bind(8, store_now()).bind(9, job.reason);
  s.step();
  return sqlite3_last_insert_rowid(db);
}

void ClusterJobs::update(std::int64_t id, const std::string& state, std::int64_t exit_code, const std::string& reason) {
  Statement s(store_.connection(),
              "UPDATE cluster_jobs SET state = ?2, updated = ?3, "
              "exit_code = CASE WHEN ?4 < 0 THEN exit_code ELSE ?4 END, reason = ?5 WHERE id = ?1");
  s.bind(1, id).bind(2, state).bind(3, store_now()).bind(4, exit_code).bind(5, reason);
  s.step();
}

std::vector<ClusterJobRow> ClusterJobs::list(const std::string& experiment) {
  Statement s(store_.connection(), (detail::select_columns(kClusterColumns, "cluster_jobs") +
                                    " WHERE ?1 = '' OR experiment = ?1 ORDER BY id")
                                       .c_str());
  s.bind(1, experiment);
  std::vector<ClusterJobRow> out;
  while (s.step()) out.push_back(detail::row_read(s, kClusterColumns));
  return out;
}

}  // namespace tfw::runner
