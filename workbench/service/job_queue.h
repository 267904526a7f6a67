// The engine service's job queue: the jobs `tfw serve` runs (experiment files, or a single
// run wrapped as one), their statuses, and the store's `jobs` table (schema v2,
// storage/migrations.cpp) that holds them, read and written on the store's own connection,
// so jobs outlive the service. The io thread queues and cancels jobs (submit.cpp, jobs.cpp),
// the workers move them through their statuses, a restart queues the running ones again
// (server.cpp). docs/service.md, docs/store.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "storage/store.h"

namespace tfw::service {

// A job's status, with the one mapping to the strings the store's CHECK constraint allows,
// the service sends and the CLI prints (built on storage/status_names.h, as RunStatus is).
enum class JobStatus { queued, running, finished, failed, cancelled };

const char* status_name(JobStatus status);
// The status a string names, or nothing (the caller says what the choices are).
std::optional<JobStatus> job_status_parse(std::string_view text);
// "queued, running, finished, failed or cancelled": for error messages and help.
std::string job_status_choices();
// A job that will not change any more by itself (finished, failed, cancelled).
bool status_final(JobStatus status);

// A job of the engine service (`tfw serve`): an experiment file it runs with `tfw run`.
struct JobRow {
  std::int64_t id = 0;
  std::string kind = "experiment";  // experiment, or run (a single run config wrapped as an experiment)
  std::string name;                 // the experiment's name: its runs are stored under it
  std::string file;                 // the experiment file (under TFW_HOME/jobs/ID/)
  JobStatus status = JobStatus::queued;
  double submitted = 0, started = 0, ended = 0;
  std::int64_t exit_code = -1;  // -1: none yet
  std::string error;
  std::string client;  // the peer address that submitted it
  // Held by the client that submitted it: cancelling it, or submitting again
  // under its name, needs this. Never sent in job lists. "" for jobs from before: held by none.
  std::string capability;
};

// The jobs of one store, on its connection: cheap to make, holds only the store, which must
// outlive it. Each thread uses its own store (the io thread's, a worker's).
class JobQueue {
 public:
  explicit JobQueue(Store& store) : store_(store) {}

  // The columns a job is read from, in order: its one list (a test holds it to the schema).
  static std::vector<std::string> columns();

  std::int64_t create(const JobRow& job);  // queued, submitted now; its id
  void set_file(std::int64_t job, const std::string& file);
  // started is set on the way to running, ended on the way to a final state; exit_code -1
  // stores none.
  void set_status(std::int64_t job, JobStatus status, std::int64_t exit_code = -1, const std::string& error = "");
  std::optional<JobRow> get(std::int64_t job);
  std::vector<JobRow> list(std::optional<JobStatus> status = std::nullopt);  // by id
  // The first job under `name` (an experiment's name; its runs are stored under it).
  std::optional<JobRow> first_named(const std::string& name);

 private:
  Store& store_;
};

// A job as the service's `jobs` reply sends it (docs/service.md): id, kind, name, status,
// submitted, started, ended, exit_code (null for none) and error.
nlohmann::json job_json(const JobRow& job);

}  // namespace tfw::service
