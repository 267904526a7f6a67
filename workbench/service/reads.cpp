// Reading runs over the socket: the `runs`, `history` and `checkpoints` requests that a
// remote RunSource (remote_source.h) makes. They answer from the same LocalRunSource a
// local reader uses, in the stored form (records_json.h), and page their replies so that no
// line exceeds half the message limit (docs/service.md, "Reading runs").
#include <fmt/format.h>

#include "workbench/common/records_json.h"
#include "workbench/service/service_impl.h"

namespace tfw::service {

namespace {

constexpr std::size_t kReplyBudget = kMaxLine / 2;  // bytes of records per reply

std::int64_t run_id(const json& message) {
  if (!message.contains("run") || !message["run"].is_number_integer()) {
    throw BadRequest(fmt::format("{} needs \"run\": an id", message["type"].get<std::string>()));
  }
  return message["run"].get<std::int64_t>();
}

}  // namespace

namespace {

// "after": an integer id (exclusive), or absent. 1e300 listed every run before.
std::int64_t after_of(const json& message) {
  if (!message.contains("after")) return 0;
  if (!message["after"].is_number_integer()) {
    throw BadRequest(fmt::format("\"after\" must be an integer id, not {}", message["after"].type_name()));
  }
  return message["after"].get<std::int64_t>();
}

// The records with ids above `after`, as JSON, as many as fit the reply budget; `more` says
// whether others were left out.
template <typename Records, typename ToJson>
json page_of(const Records& records, std::int64_t after, ToJson to_json, bool& more) {
  json list = json::array();
  more = false;
  std::size_t bytes = 0;
  for (const auto& record : records) {
    if (record.id <= after) continue;
    json item = to_json(record);
    const std::size_t size = item.dump().size() + 1;
    if (!list.empty() && bytes + size > kReplyBudget) {
      more = true;
      break;
    }
    bytes += size;
    list.push_back(std::move(item));
  }
  return list;
}

}  // namespace

// {"type":"jobs"} lists the jobs by id, from "after" (exclusive) when given, as many as fit
// the budget ("more": true when there are others): 3,500 jobs made one reply of 1 MB, past
// what a client reads.
json Service::Impl::read_jobs(const json& message) {
  bool more = false;
  json list = page_of(JobQueue(*store).list(), after_of(message), job_json, more);
  return {{"type", "jobs"}, {"jobs", std::move(list)}, {"more", more}};
}

LocalRunSource& Service::Impl::reader() {
  if (!run_reader) run_reader = std::make_unique<LocalRunSource>(home);
  return *run_reader;
}

// {"type":"runs"} lists every run by id, from "after" (exclusive) when given, as many as fit
// the budget ("more": true when there are others); {"type":"runs","run":ID} just that one.
json Service::Impl::read_runs(const json& message) {
  json list = json::array();
  bool more = false;
  if (message.contains("run")) {
    if (std::optional<RunRecord> run = reader().run(run_id(message))) list.push_back(run_stored_json(*run));
  } else {
    list = page_of(reader().runs(), after_of(message), run_stored_json, more);
  }
  return {{"type", "runs"}, {"runs", std::move(list)}, {"more", more}};
}

// {"type":"history","run":ID,"cursor":{...}}: the points and events the cursor has not seen
// and the cursor past them; "more": true when the budget cut the reply short.
json Service::Impl::read_history(const json& message) {
  const std::int64_t run = run_id(message);
  if (!reader().run(run)) throw std::runtime_error(fmt::format("no run {} in the store", run));
  RunCursor cursor;
  try {
    if (message.contains("cursor")) cursor = cursor_from_json(message["cursor"]);
  } catch (const std::exception& e) {
    throw BadRequest(fmt::format("history's \"cursor\": {}", e.what()));
  }
  RunCursor seen = cursor;
  const RunNews news = reader().news(run, seen);
  json points = json::array(), events = json::array();
  std::size_t bytes = 0;
  bool more = false;
  for (const MetricPoint& p : news.points) {
    json item = point_json(p);
    bytes += item.dump().size() + 1;
    if (bytes > kReplyBudget && !points.empty()) {
      more = true;
      break;
    }
    cursor.last_step[p.key] = p.step;
    points.push_back(std::move(item));
  }
  for (std::size_t i = 0; i < news.events.size() && !more; ++i) {
    json item = event_stored_json(news.events[i]);
    bytes += item.dump().size() + 1;
    if (bytes > kReplyBudget && !(points.empty() && events.empty())) {
      more = true;
      break;
    }
    cursor.last_event = news.events[i].id;
    events.push_back(std::move(item));
  }
  return {{"type", "history"},
          {"run", run},
          {"points", std::move(points)},
          {"events", std::move(events)},
          {"cursor", cursor_json(cursor)},
          {"more", more}};
}

json Service::Impl::read_checkpoints(const json& message) {
  const std::int64_t run = run_id(message);
  json list = json::array();
  for (const CheckpointRow& c : reader().checkpoints(run)) list.push_back(checkpoint_json(c));
  return {{"type", "checkpoints"}, {"run", run}, {"checkpoints", std::move(list)}};
}

}  // namespace tfw::service
