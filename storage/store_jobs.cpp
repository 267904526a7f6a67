// The engine service's job queue, and runs submitted to a cluster scheduler, in the store.
// See store.h.
#include <sqlite3.h>

#include <cmath>

#include "storage/sqlite_statement.h"
#include "storage/store.h"

namespace tfw {

using detail::Statement;
using detail::exec;

namespace {

JobRow job_from(Statement& s) {
  JobRow job;
  job.id = s.integer(0);
  job.kind = s.text(1);
  job.name = s.text(2);
  job.file = s.text(3);
  job.status = job_status_parse(s.text(4)).value_or(JobStatus::failed);  // the schema CHECKs the names
  job.submitted = s.real(5);
  job.started = s.is_null(6) ? 0 : s.real(6);
  job.ended = s.is_null(7) ? 0 : s.real(7);
  job.exit_code = s.is_null(8) ? -1 : s.integer(8);
  job.error = s.text(9);
  job.client = s.text(10);
  return job;
}

const char* kJobColumns = "SELECT id, kind, name, file, status, submitted, started, ended, exit_code, error, client FROM jobs";

}  // namespace

std::int64_t Store::job_create(const JobRow& job) {
  Statement s(db_, "INSERT INTO jobs (kind, name, file, status, submitted, client) VALUES (?1, ?2, ?3, 'queued', ?4, ?5)");
  s.bind(1, job.kind).bind(2, job.name).bind(3, job.file).bind(4, store_now()).bind(5, job.client);
  s.step();
  return sqlite3_last_insert_rowid(db_);
}

void Store::job_set_file(std::int64_t job, const std::string& file) {
  Statement s(db_, "UPDATE jobs SET file = ?2 WHERE id = ?1");
  s.bind(1, job).bind(2, file);
  s.step();
}

void Store::job_set_status(std::int64_t job, JobStatus status, std::int64_t exit_code, const std::string& error) {
  // started is set on the way to running, ended on the way to a final state.
  Statement s(db_, "UPDATE jobs SET status = ?2, "
                   "started = CASE WHEN ?2 = 'running' THEN ?3 ELSE started END, "
                   "ended = CASE WHEN ?2 IN ('finished','failed','cancelled') THEN ?3 ELSE NULL END, "
                   "exit_code = CASE WHEN ?4 < 0 THEN NULL ELSE ?4 END, error = ?5 WHERE id = ?1");
  s.bind(1, job).bind(2, std::string(status_name(status))).bind(3, store_now()).bind(4, exit_code).bind(5, error);
  s.step();
}

std::optional<JobRow> Store::job_get(std::int64_t job) {
  Statement s(db_, (std::string(kJobColumns) + " WHERE id = ?1").c_str());
  s.bind(1, job);
  if (!s.step()) return std::nullopt;
  return job_from(s);
}

std::vector<JobRow> Store::jobs(std::optional<JobStatus> status) {
  Statement s(db_, (std::string(kJobColumns) + " WHERE ?1 = '' OR status = ?1 ORDER BY id").c_str());
  s.bind(1, status ? std::string(status_name(*status)) : std::string());
  std::vector<JobRow> out;
  while (s.step()) out.push_back(job_from(s));
  return out;
}

namespace {

const char* kClusterColumns = "SELECT id, experiment, run, scheduler, job_id, state, script, log, submitted, updated, "
                              "exit_code, reason FROM cluster_jobs";

ClusterJobRow cluster_job_from(Statement& s) {
  ClusterJobRow job;
  job.id = s.integer(0);
  job.experiment = s.text(1);
  job.run = s.text(2);
  job.scheduler = s.text(3);
  job.job_id = s.text(4);
  job.state = s.text(5);
  job.script = s.text(6);
  job.log = s.text(7);
  job.submitted = s.real(8);
  job.updated = s.real(9);
  job.exit_code = s.is_null(10) ? -1 : s.integer(10);
  job.reason = s.text(11);
  return job;
}

}  // namespace

void Store::evaluations_add(const std::vector<EvaluationRow>& rows) {
  if (rows.empty()) return;
  // A row's own `created` where it has one (an imported run keeps its evaluations' times), now
  // otherwise. Inside the caller's transaction when there is one (tfw runs import).
  auto insert = [&] {
    for (const EvaluationRow& row : rows) {
      Statement s(db_, "INSERT INTO evaluations (run_id, checkpoint, step, corpus, metric, value, windows, tokens, mode, "
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
  Statement s(db_, "SELECT id, run_id, checkpoint, step, corpus, metric, value, windows, tokens, mode, created, blocks "
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

std::int64_t Store::cluster_job_add(const ClusterJobRow& job) {
  Statement s(db_, "INSERT INTO cluster_jobs (experiment, run, scheduler, job_id, state, script, log, submitted, updated, "
                   "reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)");
  s.bind(1, job.experiment).bind(2, job.run).bind(3, job.scheduler).bind(4, job.job_id).bind(5, job.state);
  s.bind(6, job.script).bind(7, job.log).bind(8, store_now()).bind(9, job.reason);
  s.step();
  return sqlite3_last_insert_rowid(db_);
}

void Store::cluster_job_update(std::int64_t id, const std::string& state, std::int64_t exit_code,
                               const std::string& reason) {
  Statement s(db_, "UPDATE cluster_jobs SET state = ?2, updated = ?3, "
                   "exit_code = CASE WHEN ?4 < 0 THEN exit_code ELSE ?4 END, reason = ?5 WHERE id = ?1");
  s.bind(1, id).bind(2, state).bind(3, store_now()).bind(4, exit_code).bind(5, reason);
  s.step();
}

std::vector<ClusterJobRow> Store::cluster_jobs(const std::string& experiment) {
  Statement s(db_, (std::string(kClusterColumns) + " WHERE ?1 = '' OR experiment = ?1 ORDER BY id").c_str());
  s.bind(1, experiment);
  std::vector<ClusterJobRow> out;
  while (s.step()) out.push_back(cluster_job_from(s));
  return out;
}

}  // namespace tfw
