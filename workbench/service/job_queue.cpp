// See job_queue.h.
#include "workbench/service/job_queue.h"

#include <sqlite3.h>

#include "storage/row_columns.h"
#include "storage/sqlite_statement.h"
#include "storage/status_names.h"

namespace tfw::service {

using detail::Statement;

namespace {

constexpr detail::StatusNames<JobStatus, 5> kJobNames = {{{JobStatus::queued, "queued"},
                                                          {JobStatus::running, "running"},
                                                          {JobStatus::finished, "finished"},
                                                          {JobStatus::failed, "failed"},
                                                          {JobStatus::cancelled, "cancelled"}}};

// The columns of jobs, in the schema's order (a test holds them to it).
const detail::RowColumn<JobRow> kJobColumns[] = {
    detail::column<&JobRow::id>("id"),
    detail::column<&JobRow::kind>("kind"),
    detail::column<&JobRow::name>("name"),
    detail::column<&JobRow::file>("file"),
    {"status",  // the schema CHECKs the names
     [](Statement& s, int c, JobRow& job) { job.status = job_status_parse(s.text(c)).value_or(JobStatus::failed); }},
    detail::column<&JobRow::submitted>("submitted"),
    detail::column<&JobRow::started>("started"),
    detail::column<&JobRow::ended>("ended"),
    detail::column<&JobRow::exit_code>("exit_code"),
    detail::column<&JobRow::error>("error"),
    detail::column<&JobRow::client>("client"),
    detail::column<&JobRow::capability>("capability"),
};

const std::string& job_select() {
  static const std::string sql = detail::select_columns(kJobColumns, "jobs");
  return sql;
}

}  // namespace

const char* status_name(JobStatus status) { return detail::status_name_of(kJobNames, status); }
std::optional<JobStatus> job_status_parse(std::string_view text) { return detail::status_parse(kJobNames, text); }
std::string job_status_choices() { return detail::status_choices(kJobNames); }
bool status_final(JobStatus status) { return status != JobStatus::queued && status != JobStatus::running; }

std::vector<std::string> JobQueue::columns() { return detail::column_names(kJobColumns); }

std::int64_t JobQueue::create(const JobRow& job) {
  sqlite3* db = store_.connection();
  Statement s(db,
              "INSERT INTO jobs (kind, name, file, status, submitted, client, capability) "
              "VALUES (?1, ?2, ?3, 'queued', ?4, ?5, ?6)");
  s.bind(1, job.kind)
      .bind(2, job.name)
      .bind(3, job.file)
      .bind(4, store_now())
      .bind(5, job.client)
      .bind(6, job.capability);
  s.step();
  return sqlite3_last_insert_rowid(db);
}

void JobQueue::set_file(std::int64_t job, const std::string& file) {
  Statement s(store_.connection(), "UPDATE jobs SET file = ?2 WHERE id = ?1");
  s.bind(1, job).bind(2, file);
  s.step();
}

void JobQueue::set_status(std::int64_t job, JobStatus status, std::int64_t exit_code, const std::string& error) {
  // started is set on the way to running, ended on the way to a final state.
  Statement s(store_.connection(),
              "UPDATE jobs SET status = ?2, "
              "started = CASE WHEN ?2 = 'running' THEN ?3 ELSE started END, "
              "ended = CASE WHEN ?2 IN ('finished','failed','cancelled') THEN ?3 ELSE NULL END, "
              "exit_code = CASE WHEN ?4 < 0 THEN NULL ELSE ?4 END, error = ?5 WHERE id = ?1");
  s.bind(1, job).bind(2, std::string(status_name(status))).bind(3, store_now()).bind(4, exit_code).bind(5, error);
  s.step();
}

std::optional<JobRow> JobQueue::get(std::int64_t job) {
  Statement s(store_.connection(), (job_select() + " WHERE id = ?1").c_str());
  s.bind(1, job);
  if (!s.step()) return std::nullopt;
  return detail::row_read(s, kJobColumns);
}

std::vector<JobRow> JobQueue::list(std::optional<JobStatus> status) {
  Statement s(store_.connection(), (job_select() + " WHERE ?1 = '' OR status = ?1 ORDER BY id").c_str());
  s.bind(1, status ? std::string(status_name(*status)) : std::string());
  std::vector<JobRow> out;
  while (s.step()) out.push_back(detail::row_read(s, kJobColumns));
  return out;
}

std::optional<JobRow> JobQueue::first_named(const std::string& name) {
  Statement s(store_.connection(), (job_select() + " WHERE name = ?1 ORDER BY id LIMIT 1").c_str());
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return detail::row_read(s, kJobColumns);
}

nlohmann::json job_json(const JobRow& j) {
  return {{"id", j.id},
          {"kind", j.kind},
          {"name", j.name},
          {"status", status_name(j.status)},
          {"submitted", j.submitted},
          {"started", j.started},
          {"ended", j.ended},
          {"exit_code", j.exit_code < 0 ? nlohmann::json(nullptr) : nlohmann::json(j.exit_code)},
          {"error", j.error}};
}

}  // namespace tfw::service
