// See records_json.h.
#include "workbench/common/records_json.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>


namespace tfw {

nlohmann::json json_or_empty(const std::string& text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  return value.is_discarded() ? nlohmann::json::object() : value;
}

nlohmann::json run_json(const RunRecord& r) {
  return {{"id", r.id}, {"experiment", r.experiment}, {"name", r.name}, {"family", r.family},
          {"status", status_name(r.status)}, {"heartbeat", r.heartbeat}, {"seed", r.seed}, {"git_commit", r.git_commit},
          {"host", r.host}, {"started", r.started}, {"ended", r.ended},
          {"parent", r.parent == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.parent)},
          {"growth_method", r.growth_method}, {"growth_options", r.growth_options}, {"stage", r.stage},
          {"parameters", r.parameters}, {"tokens", r.tokens}, {"flops", r.flops}, {"inherited_flops", r.inherited_flops},
          {"cumulative_flops", r.cumulative_flops}, {"final_metrics", json_or_empty(r.final_metrics)},
          {"error", r.error}, {"run_dir", r.run_dir}};
}

nlohmann::json job_json(const JobRow& j) {
  return {{"id", j.id}, {"kind", j.kind}, {"name", j.name}, {"status", status_name(j.status)}, {"submitted", j.submitted},
          {"started", j.started}, {"ended", j.ended},
          {"exit_code", j.exit_code < 0 ? nlohmann::json(nullptr) : nlohmann::json(j.exit_code)}, {"error", j.error}};
}

}  // namespace tfw

namespace tfw {

namespace {

using nlohmann::json;

const json& field(const json& object, const char* name) {
  if (!object.is_object() || !object.contains(name)) throw std::runtime_error(fmt::format("a stored record lacks \"{}\"", name));
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

json run_stored_json(const RunRecord& r) {
  return {{"id", r.id}, {"experiment", r.experiment}, {"name", r.name}, {"family", r.family}, {"config", r.config},
          {"status", status_name(r.status)}, {"heartbeat", number_json(r.heartbeat)}, {"seed", r.seed},
          {"git_commit", r.git_commit}, {"host", r.host}, {"started", number_json(r.started)},
          {"ended", number_json(r.ended)}, {"parent", r.parent}, {"growth_method", r.growth_method},
          {"growth_options", r.growth_options}, {"stage", r.stage}, {"parameters", r.parameters}, {"tokens", r.tokens},
          {"flops", number_json(r.flops)}, {"inherited_flops", number_json(r.inherited_flops)},
          {"cumulative_flops", number_json(r.cumulative_flops)}, {"final_metrics", r.final_metrics},
          {"error", r.error}, {"run_dir", r.run_dir}};
}

RunRecord run_from_stored_json(const json& v) {
  RunRecord r;
  r.id = integer(v, "id");
  r.experiment = text(v, "experiment");
  r.name = text(v, "name");
  r.family = text(v, "family");
  r.config = text(v, "config");
  std::optional<RunStatus> status = run_status_parse(text(v, "status"));
  if (!status) throw std::runtime_error(fmt::format("unknown run status \"{}\"", text(v, "status")));
  r.status = *status;
  r.heartbeat = number(v, "heartbeat");
  r.seed = integer(v, "seed");
  r.git_commit = text(v, "git_commit");
  r.host = text(v, "host");
  r.started = number(v, "started");
  r.ended = number(v, "ended");
  r.parent = integer(v, "parent");
  r.growth_method = text(v, "growth_method");
  r.growth_options = text(v, "growth_options");
  r.stage = integer(v, "stage");
  r.parameters = integer(v, "parameters");
  r.tokens = integer(v, "tokens");
  r.flops = number(v, "flops");
  r.inherited_flops = number(v, "inherited_flops");
  r.cumulative_flops = number(v, "cumulative_flops");
  r.final_metrics = text(v, "final_metrics");
  r.error = text(v, "error");
  r.run_dir = text(v, "run_dir");
  return r;
}

json point_json(const MetricPoint& p) {
  return {{"key", p.key}, {"step", p.step}, {"tokens", p.tokens}, {"flops", number_json(p.flops)},
          {"wall", number_json(p.wall)}, {"value", number_json(p.value)}};
}

MetricPoint point_from_json(const json& v, std::int64_t run) {
  MetricPoint p;
  p.run = run;
  p.key = text(v, "key");
  p.step = integer(v, "step");
  p.tokens = integer(v, "tokens");
  p.flops = number(v, "flops");
  p.wall = number(v, "wall");
  p.value = number(v, "value");
  return p;
}

json event_stored_json(const EventRow& e) {
  return {{"id", e.id}, {"kind", e.kind}, {"step", e.step}, {"wall", number_json(e.wall)}, {"payload", e.payload}};
}

EventRow event_from_stored_json(const json& v, std::int64_t run) {
  EventRow e;
  e.run = run;
  e.id = integer(v, "id");
  e.kind = text(v, "kind");
  e.step = integer(v, "step");
  e.wall = number(v, "wall");
  e.payload = text(v, "payload");
  return e;
}

json checkpoint_json(const CheckpointRow& c) {
  return {{"step", c.step}, {"bytes", c.bytes}, {"path", c.path}, {"checksum", c.checksum}};
}

CheckpointRow checkpoint_from_json(const json& v, std::int64_t run) {
  CheckpointRow c;
  c.run = run;
  c.step = integer(v, "step");
  c.bytes = integer(v, "bytes");
  c.path = text(v, "path");
  c.checksum = text(v, "checksum");
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
    if (!step.is_number_integer()) throw std::runtime_error(fmt::format("\"last_step\".\"{}\" should be an integer", key));
    cursor.last_step[key] = step.get<std::int64_t>();
  }
  return cursor;
}

}  // namespace tfw
