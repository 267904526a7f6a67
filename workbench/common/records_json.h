// The store's records as JSON, one shape everywhere: `tfw runs --json`, the service's
// summary and watch replies, `tfw jobs --json`. Keys are documented in docs/cli.md and
// docs/service.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "storage/store.h"

namespace tfw {

// `text` parsed as JSON, or {} when it is not JSON (a run's final_metrics).
nlohmann::json json_or_empty(const std::string& text);
nlohmann::json run_json(const RunRecord& run);
nlohmann::json job_json(const JobRow& job);

}  // namespace tfw
