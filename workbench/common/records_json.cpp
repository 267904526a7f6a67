// See records_json.h.
#include "workbench/common/records_json.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "storage/run_json.h"

namespace tfw {

nlohmann::json json_or_empty(const std::string& text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  return value.is_discarded() ? nlohmann::json::object() : value;
}

nlohmann::json run_json(const RunRecord& r) {
  nlohmann::json object = run_record_json(r);
  object["id"] = r.id;
  object["parent"] = r.parent == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.parent);
  object["final_metrics"] = json_or_empty(r.final_metrics.text());
  object["run_dir"] = r.run_dir;
  return object;
}

namespace {

using nlohmann::json;

const json& field(const json& object, const char* name) {
  if (!object.is_object() || !object.contains(name))
    throw std::runtime_error(fmt::format("a stored record lacks \"{}\"", name));
  return object[name];
}

std::int64_t integer(const json& object, const char* name) {
  const json& value = field(object, name);
  if (!value.is_number_integer()) throw std::runtime_error(fmt::format("\"{}\" should be an integer", name));
  return value.get<std::int64_t>();
}

double number(const json& object, const char* name) { return number_from_json(field(object, name), name); }

std::string text(const json& object, const char* name) {
  const json& value = field(object, name);
  if (!value.is_string()) throw std::runtime_error(fmt::format("\"{}\" should be a string", name));
  return value.get<std::string>();
}

}  // namespace

json number_json(double value) {
  if (std::isfinite(value)) return value;
  return std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
}

double number_from_json(const json& value, const char* name) {
  if (value.is_number()) return value.get<double>();
  if (value == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (value == "inf") return std::numeric_limits<double>::infinity();
  if (value == "-inf") return -std::numeric_limits<double>::infinity();
  throw std::runtime_error(fmt::format("\"{}\" should be a number, \"nan\", \"inf\" or \"-inf\"", name));
}

namespace {

// Each record's fields, listed once for both directions: `visit(name, member)` on a const
// record encodes, on a mutable one decodes.
struct RunFields {
  template <typename Run, typename Visit>
  void operator()(Run& r, Visit&& visit) const {
    visit("id", r.id), visit("experiment", r.experiment), visit("name", r.name), visit("family", r.family);
    visit("config", r.config), visit("status", r.status), visit("heartbeat", r.heartbeat), visit("seed", r.seed);
    visit("git_commit", r.git_commit), visit("host", r.host), visit("started", r.started), visit("ended", r.ended);
    visit("parent", r.parent), visit("growth_method", r.growth_method), visit("growth_options", r.growth_options);
    visit("stage", r.stage), visit("parameters", r.parameters), visit("tokens", r.tokens), visit("flops", r.flops);
    visit("inherited_flops", r.inherited_flops), visit("cumulative_flops", r.cumulative_flops);
    visit("final_metrics", r.final_metrics), visit("error", r.error), visit("run_dir", r.run_dir);
  }
};

struct PointFields {
  template <typename Point, typename Visit>
  void operator()(Point& p, Visit&& visit) const {
    visit("key", p.key), visit("step", p.step), visit("tokens", p.tokens), visit("flops", p.flops);
    visit("wall", p.wall), visit("value", p.value);
  }
};

struct EventFields {
  template <typename Event, typename Visit>
  void operator()(Event& e, Visit&& visit) const {
    visit("id", e.id), visit("kind", e.kind), visit("step", e.step), visit("wall", e.wall), visit("payload", e.payload);
  }
};

struct CheckpointFields {
  template <typename Checkpoint, typename Visit>
  void operator()(Checkpoint& c, Visit&& visit) const {
    visit("step", c.step), visit("bytes", c.bytes), visit("path", c.path), visit("checksum", c.checksum);
  }
};

json encode(std::int64_t value) { return value; }
json encode(double value) { return number_json(value); }
json encode(const std::string& value) { return value; }
json encode(RunStatus value) { return status_name(value); }
json encode(const FinalMetrics& value) { return value.text(); }

void decode(const json& object, const char* name, std::int64_t& value) { value = integer(object, name); }
void decode(const json& object, const char* name, double& value) { value = number(object, name); }
void decode(const json& object, const char* name, std::string& value) { value = text(object, name); }
void decode(const json& object, const char* name, FinalMetrics& value) {
  value = FinalMetrics::from_text(text(object, name));
}
void decode(const json& object, const char* name, RunStatus& value) {
  const std::string given = text(object, name);
  std::optional<RunStatus> status = run_status_parse(given);
  if (!status) throw std::runtime_error(fmt::format("unknown run status \"{}\"", given));
  value = *status;
}

template <typename Record, typename Fields>
json encode_record(const Record& record, Fields fields) {
  json out = json::object();
  fields(record, [&](const char* name, const auto& value) { out[name] = encode(value); });
  return out;
}

template <typename Record, typename Fields>
Record decode_record(const json& object, Fields fields) {
  if (!object.is_object()) throw std::runtime_error("a stored record should be a JSON object");
  Record record;
  fields(record, [&](const char* name, auto& value) { decode(object, name, value); });
  return record;
}

}  // namespace

json run_stored_json(const RunRecord& r) { return encode_record(r, RunFields()); }
RunRecord run_from_stored_json(const json& v) { return decode_record<RunRecord>(v, RunFields()); }
json point_json(const MetricPoint& p) { return encode_record(p, PointFields()); }
json event_stored_json(const EventRow& e) { return encode_record(e, EventFields()); }
json checkpoint_json(const CheckpointRow& c) { return encode_record(c, CheckpointFields()); }

// The stored form leaves out the run, which the request named.
MetricPoint point_from_json(const json& v, std::int64_t run) {
  MetricPoint p = decode_record<MetricPoint>(v, PointFields());
  p.run = run;
  return p;
}

EventRow event_from_stored_json(const json& v, std::int64_t run) {
  EventRow e = decode_record<EventRow>(v, EventFields());
  e.run = run;
  return e;
}

CheckpointRow checkpoint_from_json(const json& v, std::int64_t run) {
  CheckpointRow c = decode_record<CheckpointRow>(v, CheckpointFields());
  c.run = run;
  return c;
}

json cursor_json(const RunCursor& cursor) {
  return {{"last_step", cursor.last_step}, {"last_event", cursor.last_event}};
}

RunCursor cursor_from_json(const json& v) {
  RunCursor cursor;
  cursor.last_event = integer(v, "last_event");
  const json& steps = field(v, "last_step");
  if (!steps.is_object()) throw std::runtime_error("\"last_step\" should be an object of key: step");
  for (const auto& [key, step] : steps.items()) {
    if (!step.is_number_integer())
      throw std::runtime_error(fmt::format("\"last_step\".\"{}\" should be an integer", key));
    cursor.last_step[key] = step.get<std::int64_t>();
  }
  return cursor;
}

}  // namespace tfw
