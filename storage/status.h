// The statuses of runs, with the one mapping to the strings the store keeps (its CHECK
// constraints), the service sends and the CLI prints. The engine service's job statuses
// live with its job queue (workbench/service/job_queue.h), on the same name table
// (status_names.h). docs/design/ARCHITECTURE.md, "Statuses".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tfw {

// A run's status. `crashed` is never written: it is derived when reading a `running` run
// whose heartbeat is older than store_heartbeat_timeout().
enum class RunStatus { queued, running, finished, failed, killed, crashed };

const char* status_name(RunStatus status);

// The status a string names, or nothing (the caller says what the choices are).
std::optional<RunStatus> run_status_parse(std::string_view text);

// "queued, running, finished, failed, killed or crashed": for error messages and help.
std::string run_status_choices();

// A run that will not change any more by itself (finished, failed, killed, crashed).
bool status_final(RunStatus status);

}  // namespace tfw
