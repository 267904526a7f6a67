// The service's side of runs that record to it from another machine (`tfw train --record-to`,
// remote_book.h): it writes their records, points, events and checkpoint rows to its store,
// through the same store-side logic a local run uses (runner/run_book.h). Messages are in
// docs/service.md, "Recording runs". A resent batch (its reply was lost) carries the sequence
// number already applied and is acknowledged without being applied twice.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/home.h"
#include "runner/lineage.h"
#include "runner/run_book.h"
#include "workbench/service/service_impl.h"

namespace tfw::service {

namespace fs = std::filesystem;

namespace {

const json& field(const json& message, const char* key, json::value_t type) {
  auto it = message.find(key);
  const bool number = type == json::value_t::number_integer || type == json::value_t::number_float;
  if (it == message.end() || (number ? !it->is_number() : it->type() != type)) {
    throw BadRequest(fmt::format("{} needs \"{}\" ({})", message.value("type", "record"), key,
                                 number                          ? "a number"
                                 : type == json::value_t::string ? "a string"
                                                                 : "an array"));
  }
  return *it;
}

std::string text(const json& message, const char* key) { return field(message, key, json::value_t::string); }
std::int64_t integer(const json& message, const char* key) {
  return field(message, key, json::value_t::number_integer).get<std::int64_t>();
}
double real(const json& message, const char* key) {
  return field(message, key, json::value_t::number_float).get<double>();
}

// A recording client touches only the runs it created: each message about a run carries the
// capability record_create gave for it (docs/service.md, "Recording runs").
void require_capability(Store& store, std::int64_t run, const json& message, const std::string& type) {
  const std::string capability = message.value("capability", "");
  if (!store.record_granted(run, capability)) {
    throw BadRequest(
        fmt::format("{}: run {} is not held by this client (its \"capability\" {}); a recording "
                    "client may write only to the runs it created with record_create",
                    type, run, capability.empty() ? "is missing" : "does not match"));
  }
}

}  // namespace

// A new run recorded by a client: its folder checked, its record created, and the capability
// that lets this client (and only it) write to the run.
json Service::Impl::record_create(const json& message, const std::string& book) {
  // A create resent after a lost reply gets the run the first one made.
  if (auto it = record_created.find(book); !book.empty() && it != record_created.end()) {
    return {{"type", "record_created"}, {"run", it->second.first}, {"capability", it->second.second}};
  }
  const json& r = field(message, "record", json::value_t::object);
  RunRecord record;
  record.experiment = text(r, "experiment");
  record.name = text(r, "name");
  name_check(record.name, "run name", "record_create");
  name_check(record.experiment, "experiment name", "record_create");
  record.family = text(r, "family");
  record.config = text(r, "config");
  record.seed = integer(r, "seed");
  record.git_commit = text(r, "git_commit");
  record.host = text(r, "host");
  record.parameters = integer(r, "parameters");
  record.run_dir = text(r, "run_dir");
  // The folder is the client's. Outside this service's home the service never writes to it
  // (run_recorded refuses to resume a run there). Inside it (a cluster's shared home), it
  // must be the folder of this very experiment and name: a client may not claim another
  // run's folder, which a job of the service would then resume and write into.
  if (record.run_dir.empty() || record.run_dir[0] != '/') {
    throw BadRequest(fmt::format("record_create: run_dir '{}' must be an absolute path", record.run_dir));
  }
  if (path_inside(record.run_dir, home)) {
    const std::string own = runner::run_dir_of(home, record.experiment, record.name);
    std::error_code ec;
    if (fs::weakly_canonical(record.run_dir, ec) != fs::weakly_canonical(own, ec)) {
      throw BadRequest(
          fmt::format("record_create: run_dir '{}' is inside this service's home but is not the "
                      "folder of run '{}' of experiment '{}' ({}): a client may not claim another "
                      "run's folder",
                      record.run_dir, record.name, record.experiment, own));
    }
  }
  record.inherited_flops = 0;
  store->experiment_ensure(record.experiment);
  std::int64_t id = 0;
  if (message.contains("lineage") && message["lineage"].is_object()) {
    const json& l = message["lineage"];
    runner::LineageSource source;
    source.checkpoint = text(l, "checkpoint");
    source.parent_run = integer(l, "parent_run");
    source.inherited_flops = real(l, "inherited_flops");
    source.growth_method = text(l, "growth_method");
    source.growth_options = text(l, "growth_options");
    // A lineage attaches the new run under its parent, which can then not be deleted: the
    // parent (named by the checkpoint's metadata, or the run that wrote the checkpoint) must
    // be a run this client holds too.
    if (const std::int64_t parent = runner::lineage_from(*store, source).parent; parent != 0) {
      const std::string held = l.contains("parent_capability") && l["parent_capability"].is_string()
                                   ? l["parent_capability"].get<std::string>()
                                   : std::string();
      if (!store->record_granted(parent, held)) {
        throw BadRequest(
            fmt::format("record_create: its lineage names run {} as the parent, which is not held by "
                        "this client (its \"parent_capability\" {}); a client grows only from runs it "
                        "recorded itself",
                        parent, held.empty() ? "is missing" : "does not match"));
      }
    }
    id = runner::book_create(*store, record, &source);
  } else {
    id = runner::book_create(*store, record, nullptr);
  }
  const std::string capability = store->record_grant(id);
  if (!book.empty()) record_created[book] = {id, capability};
  return {{"type", "record_created"}, {"run", id}, {"capability", capability}};
}

json Service::Impl::record(const json& message) {
  const std::string type = message["type"];
  if (type == "record_resolve") {
    if (message.contains("run_dir")) {
      const std::string dir = text(message, "run_dir");
      for (const RunRecord& r : store->runs()) {
        if (r.run_dir == dir) return {{"type", "record_resolved"}, {"id", r.id}, {"run_dir", r.run_dir}};
      }
      return {{"type", "record_resolved"}, {"id", 0}, {"run_dir", dir}};
    }
    const std::optional<RunRecord> r = store->run_find(text(message, "run"));
    return {{"type", "record_resolved"}, {"id", r ? r->id : 0}, {"run_dir", r ? r->run_dir : ""}};
  }
  if (type == "record_last_checkpoint") {  // `tfw grow --from-run EXPERIMENT/RUN --record-to`
    const std::optional<RunRecord> r = store->run_in_experiment(text(message, "experiment"), text(message, "name"));
    const std::vector<CheckpointRow> rows = r ? store->checkpoints(r->id) : std::vector<CheckpointRow>{};
    return {{"type", "record_last_checkpoint"},
            {"run", r ? r->id : 0},
            {"checkpoint", rows.empty() ? "" : rows.back().path}};
  }
  if (type == "record_clear") {
    const std::optional<RunRecord> old = store->run_in_experiment(text(message, "experiment"), text(message, "name"));
    if (old) require_capability(*store, old->id, message, type);
    std::string said;
    runner::book_clear_name(*store, text(message, "experiment"), text(message, "name"),
                            [&](const std::string& line) { said = line; });
    return {{"type", "record_cleared"}, {"message", said}};
  }
  const std::string book = message.value("open_id", "");
  if (type == "record_create") return record_create(message, book);
  if (type == "record_flush") return {{"type", "record_flushed"}};  // everything before it is applied

  const std::int64_t run = integer(message, "run");
  if (!store->run_get(run)) throw std::runtime_error(fmt::format("no run {} in this service's store", run));
  require_capability(*store, run, message, type);
  if (type == "record_resume") {
    // The config it resumes with (an older client sends none: the stored one stays).
    const std::string config = message.contains("config") ? text(message, "config") : std::string();
    const std::int64_t step = message.contains("step") ? integer(message, "step") : 0;
    runner::book_resume(*store, run, config, step);
    return {{"type", "record_resumed"}};
  }
  if (type == "record_finish") {
    const std::optional<RunStatus> status = run_status_parse(text(message, "status"));
    if (!status) throw BadRequest("record_finish needs \"status\": finished, killed or failed");
    store->run_set_progress(run, integer(message, "tokens"), real(message, "flops"));
    store->run_finish(run, *status, text(message, "final_metrics"), text(message, "error"));
    return {{"type", "record_finished"}};
  }
  // Batches and checkpoint rows: applied once per (book, seq).
  const std::uint64_t seq =
      message.contains("seq") && message["seq"].is_number_unsigned() ? message["seq"].get<std::uint64_t>() : 0;
  if (!book.empty() && seq != 0) {
    std::uint64_t& last = record_seq[book];
    if (seq <= last) return {{"type", "recorded"}, {"seq", seq}, {"duplicate", true}};
    last = seq;
  }
  if (type == "record_checkpoint") {
    if (message.contains("removed")) {
      store->checkpoint_remove(run, text(message, "removed"));
    } else {
      store->run_set_progress(run, integer(message, "tokens"), real(message, "flops"));
      store->checkpoint_add(
          {run, integer(message, "step"), integer(message, "bytes"), text(message, "path"), text(message, "checksum")});
    }
    store->run_heartbeat(run);
    return {{"type", "recorded"}, {"seq", seq}};
  }
  if (type == "record") {
    std::vector<MetricPoint> points;
    for (const json& p : field(message, "points", json::value_t::array)) {
      if (!p.is_array() || p.size() != 6 || !p[0].is_string() || !p[1].is_number() || !p[2].is_number() ||
          !p[3].is_number() || !p[4].is_number() || !(p[5].is_number() || p[5].is_null())) {
        throw BadRequest("record: each point is [key, step, tokens, flops, wall, value or null]");
      }
      const std::string& key = p[0].get_ref<const std::string&>();
      if (key.empty() || key.size() > 256 ||
          std::any_of(key.begin(), key.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
        throw BadRequest("record: a metric key is 1 to 256 bytes without control characters (a NUL, a newline)");
      }
      points.push_back({run, p[0].get<std::string>(), p[1].get<std::int64_t>(), p[2].get<std::int64_t>(),
                        p[3].get<double>(), p[4].get<double>(), p[5].is_null() ? std::nan("") : p[5].get<double>()});
    }
    if (!points.empty()) store->metrics_insert(points);
    for (const json& e : field(message, "events", json::value_t::array)) {
      if (!e.is_array() || e.size() != 3 || !e[0].is_number() || !e[1].is_string() || !e[2].is_string()) {
        throw BadRequest("record: each event is [step, kind, payload]");
      }
      store->event_add({run, e[0].get<std::int64_t>(), e[1].get<std::string>(), e[2].get<std::string>(), 0});
    }
    store->run_heartbeat(run);
    return {{"type", "recorded"}, {"seq", seq}};
  }
  throw BadRequest(
      fmt::format("unknown message type '{}': the record messages are record, record_resolve, "
                  "record_clear, record_create, record_resume, record_checkpoint, record_flush and "
                  "record_finish",
                  type));
}

}  // namespace tfw::service
