// The capabilities of the jobs a client submitted to an engine service: the
// service lets only their holder cancel a job, or submit again under its name (which resumes
// its runs). `tfw submit` and the GUI keep each one here, by the service's address; `tfw
// cancel` and the next submit of the name send it. The file is the client's own:
// $TFW_STATE_DIR, else $XDG_STATE_HOME/tfw, else ~/.local/state/tfw, then `jobs.json`, in a
// folder of mode 0700 and a file of mode 0600, written whole (a new file renamed over the
// old one), read by a bounded parser (at most 4 MiB; the newest 10,000 jobs are kept).
// Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace tfw::service {

// Keeps job `job`'s capability, under `name`, for the service at `address`. A file that cannot
// be written is said on stderr and skipped: the job runs, but this client cannot cancel it.
void job_capability_keep(const std::string& address, std::int64_t job, const std::string& name,
                         const std::string& capability);

// The capability kept for job `job`, or for the newest job under `name`, of the service at
// `address`; "" when none is kept.
std::string job_capability_of_job(const std::string& address, std::int64_t job);
std::string job_capability_of_name(const std::string& address, const std::string& name);

// The client's side of `submit` and `cancel`, for `tfw submit`/`tfw cancel` and the GUI alike:
// `send` makes the request of the service at `address`. A submit of job name `name` carries the
// capability kept for that name (a resubmission resumes its runs) and keeps the reply's; a
// cancel carries the job's.
using JobRequest = std::function<nlohmann::json(const nlohmann::json&)>;
nlohmann::json job_submit(const std::string& address, const std::string& name, nlohmann::json message,
                          const JobRequest& send);
nlohmann::json job_cancel(const std::string& address, std::int64_t job, const JobRequest& send);

// The file (for messages and tests).
std::string job_capabilities_path();

}  // namespace tfw::service
