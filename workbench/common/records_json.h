// The store's records as JSON, one shape everywhere: `tfw runs --json`, the service's
// summary and watch replies. Keys are documented in docs/cli.md and docs/service.md. A
// service job's JSON (`tfw jobs --json`) lives with the job queue (workbench/service/job_queue.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "storage/store.h"

namespace tfw {

// `text` parsed as JSON, or {} when it is not JSON (a run's final_metrics).
nlohmann::json json_or_empty(const std::string& text);
nlohmann::json run_json(const RunRecord& run);

// The stored form, for the service's `runs`, `history` and `checkpoints` replies that a
// remote RunSource reads (docs/service.md, "Reading runs"): every field exactly as the store
// holds it, so that decoding gives back equal values. Unlike run_json, a record carries its
// config and keeps final_metrics and event payloads as their stored text, and a double
// that is not finite travels as the string "nan", "inf" or "-inf". The decoders throw
// std::runtime_error naming the field when a message does not have this shape.
nlohmann::json number_json(double value);
double number_from_json(const nlohmann::json& value, const char* field);
nlohmann::json run_stored_json(const RunRecord& run);
RunRecord run_from_stored_json(const nlohmann::json& value);
nlohmann::json point_json(const MetricPoint& point);  // without the run
MetricPoint point_from_json(const nlohmann::json& value, std::int64_t run);
nlohmann::json event_stored_json(const EventRow& event);  // without the run
EventRow event_from_stored_json(const nlohmann::json& value, std::int64_t run);
nlohmann::json checkpoint_json(const CheckpointRow& checkpoint);
CheckpointRow checkpoint_from_json(const nlohmann::json& value, std::int64_t run);
nlohmann::json cursor_json(const RunCursor& cursor);
RunCursor cursor_from_json(const nlohmann::json& value);

}  // namespace tfw
