// TensorBoard event files and MLflow's file store from an experiment's runs (tracking.h).
//
// TensorBoard's event file is a sequence of records, each
//   u64 length (little-endian) | u32 masked CRC-32C of the length bytes | data | u32 masked CRC-32C of data
// with masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, and data an `Event` protocol buffer
// (tensorboard/compat/proto/event.proto): wall_time = 1 (double), step = 2 (int64),
// file_version = 3 (string, "brain.Event:2" in the first record), summary = 5. A Summary holds
// repeated Value = 1; a Value has tag = 1 and simple_value = 2 (float). A float64 tensor value
// (tensor = 8) would keep every digit, but TensorBoard's data server, which its web page reads
// through by default, shows only float32 scalars, so simple_value it is.
#include "workbench/results/tracking.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/core/sha256.h"
#include "storage/status.h"
#include "storage/store.h"

namespace tfw::results {

namespace fs = std::filesystem;

namespace {

// --- CRC-32C -------------------------------------------------------------------------------

const std::array<std::uint32_t, 256>& crc32c_table() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
      t[i] = c;
    }
    return t;
  }();
  return table;
}

std::uint32_t masked_crc(std::string_view data) {
  const std::uint32_t c = crc32c(data.data(), data.size());
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// --- protocol buffer encoding (the few wire types the Event message needs) ----------------

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, int wire) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | wire);
}

void put_fixed(std::string& out, const void* bytes, std::size_t n) {  // little-endian hosts only (static_assert below)
  out.append(static_cast<const char*>(bytes), n);
}

void put_double(std::string& out, int field, double v) {
  put_key(out, field, 1);
  put_fixed(out, &v, sizeof v);
}

void put_uint(std::string& out, int field, std::uint64_t v) {
  put_key(out, field, 0);
  put_varint(out, v);
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

static_assert(sizeof(double) == 8 && sizeof(float) == 4);

std::string scalar_value(const std::string& tag, double value) {
  std::string v;
  put_bytes(v, 1, tag);
  const float single = static_cast<float>(value);  // simple_value is a float: TensorBoard's scalars are
  put_key(v, 2, 5);                                // float32 in every reader (the data server's too)
  put_fixed(v, &single, sizeof single);
  return v;
}

void put_record(std::string& file, std::string_view data) {
  std::string header;
  const std::uint64_t length = data.size();
  put_fixed(header, &length, sizeof length);
  file += header;
  const std::uint32_t length_crc = masked_crc(header);
  put_fixed(file, &length_crc, sizeof length_crc);
  file.append(data);
  const std::uint32_t data_crc = masked_crc(data);
  put_fixed(file, &data_crc, sizeof data_crc);
}

// --- names, paths and files ----------------------------------------------------------------

bool plain_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

void require_plain(const std::string& what, const std::string& name) {
  if (!plain_name(name)) {
    throw UsageError(with_hint(fmt::format("{} '{}' cannot be a folder name; nothing was written", what, name),
                               "names of letters, digits, '.', '_' and '-' (not starting with '.') export; rename "
                               "the run or export the others"));
  }
}

// The export's own folder (DIR, resolved) while it writes: a file that would land outside it
// through a link planted below DIR is refused.
thread_local fs::path t_export_root;
thread_local fs::path t_export_lexical;  // DIR as given, absolute: where folders are made from

struct ExportRoot {
  explicit ExportRoot(const std::string& dir) {
    fs::create_directories(dir);
    t_export_root = fs::canonical(dir);
    t_export_lexical = fs::absolute(dir).lexically_normal();
  }
  ~ExportRoot() {
    t_export_root.clear();
    t_export_lexical.clear();
  }
};

[[noreturn]] void refuse_link(const fs::path& path) {
  throw UsageError(with_hint(
      fmt::format("{} leads outside {} (a symbolic link below it): not written", path.string(), t_export_root.string()),
      "remove the link, or export into a fresh folder"));
}

// The folders down to `dir`, made one at a time below the export's folder: a link on the way
// is refused before anything is made through it (a planted DIR/EXPERIMENT -> elsewhere made
// the run's folder outside).
void make_folders(const fs::path& dir) {
  if (t_export_root.empty()) {
    fs::create_directories(dir);
    return;
  }
  const fs::path target = fs::absolute(dir).lexically_normal();
  const fs::path relative = target.lexically_relative(t_export_lexical);
  if (relative.empty() || *relative.begin() == "..") refuse_link(target);
  fs::path at = t_export_lexical;
  for (const fs::path& part : relative) {
    if (part == ".") continue;
    at /= part;
    if (fs::is_symlink(at)) refuse_link(at);
    if (!fs::exists(at)) fs::create_directory(at);
  }
}

// Refuses `path` (to be written or removed) when it is a link or resolves outside the export's
// folder.
void confine(const fs::path& path) {
  if (t_export_root.empty()) return;
  if (fs::is_symlink(path) || !path_inside(path.string(), t_export_root.string())) refuse_link(path);
}

void write_file(const fs::path& path, std::string_view text) {
  make_folders(path.parent_path());
  confine(path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out)
    throw Error(
        with_hint(fmt::format("cannot write {}", path.string()), "check the folder's permissions and free space"));
}

std::string shortest(double v) { return fmt::format("{}", v); }

// The run's lineage FLOPs before its own (inherited_flops is -1 only while a run is created).
double inherited(const RunRecord& r) { return r.inherited_flops > 0 ? r.inherited_flops : 0.0; }

std::vector<MetricPoint> sorted_points(Store& store, const RunRecord& r) {
  std::vector<MetricPoint> points = store.metrics(r.id);
  std::stable_sort(points.begin(), points.end(), [](const MetricPoint& a, const MetricPoint& b) {
    return a.step != b.step ? a.step < b.step : a.key < b.key;
  });
  return points;
}

// One point per step that has any: the axes at that step (tokens and FLOPs are the step's,
// the same for every key logged at it), at the first point's time.
std::vector<const MetricPoint*> steps_of(const std::vector<MetricPoint>& points) {
  std::vector<const MetricPoint*> steps;
  for (const MetricPoint& p : points) {
    if (steps.empty() || steps.back()->step != p.step) steps.push_back(&p);
  }
  return steps;
}

// --- MLflow --------------------------------------------------------------------------------

std::string yaml_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out + "'";
}

// Milliseconds, halves rounded up (the test computes the same: floor(x * 1000 + 0.5)).
std::int64_t millis(double unix_seconds) { return static_cast<std::int64_t>(std::floor(unix_seconds * 1000.0 + 0.5)); }

std::string mlflow_experiment_id(const std::string& experiment) {
  const std::uint64_t id = std::stoull(sha256_hex("tfw experiment\n" + experiment).substr(0, 15), nullptr, 16);
  return std::to_string(id == 0 ? 1 : id);
}

std::string mlflow_run_id(const std::string& experiment, const std::string& name) {
  return sha256_hex("tfw run\n" + experiment + "\n" + name).substr(0, 32);
}

int mlflow_status(RunStatus s) {  // mlflow.entities.RunStatus
  switch (s) {
    case RunStatus::running: return 1;
    case RunStatus::queued: return 2;
    case RunStatus::finished: return 3;
    case RunStatus::failed:
    case RunStatus::crashed: return 4;
    case RunStatus::killed: return 5;
  }
  return 4;
}

bool key_part_ok(const std::string& part) {
  return !part.empty() && part != "." && part != ".." && std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == ' ' || c == ':';
  });
}

// A metric or parameter key as a relative path under metrics/ or params/: parts split at '/',
// each a plain name, so no key reaches outside its folder.
fs::path key_path(const std::string& what, const std::string& key) {
  fs::path path;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = key.find('/', start);
    const std::string part = key.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!key_part_ok(part)) {
      throw UsageError(with_hint(fmt::format("{} '{}' is not a key MLflow can store; nothing was written", what, key),
                                 "MLflow keys are letters, digits and '_ . - : /' with no empty or '..' part"));
    }
    path /= part;
    if (slash == std::string::npos) return path;
    start = slash + 1;
  }
}

void flatten(const toml::table& table, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [k, node] : table) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table()) {
      flatten(*sub, key, out);
    } else if (const auto* s = node.as_string()) {
      out[key] = s->get();
    } else if (const auto* d = node.as_floating_point()) {
      out[key] = shortest(d->get());
    } else if (const auto* i = node.as_integer()) {
      out[key] = std::to_string(i->get());
    } else if (const auto* b = node.as_boolean()) {
      out[key] = b->get() ? "true" : "false";
    } else {
      std::ostringstream text;
      text << toml::toml_formatter(node, toml::format_flags::none);
      out[key] = text.str();
    }
  }
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc) {
  const auto& table = crc32c_table();
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ bytes[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

std::string mlflow_metric_key(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '@' ? std::string("_at_") : std::string(1, c);
  return out;
}

std::vector<std::string> tensorboard_write(const ExperimentResults& set, const std::string& dir) {
  Store& store = set.store();
  const std::string& experiment = set.experiment().name;
  require_plain("experiment name", experiment);
  for (const RunResult& run : set.runs()) {  // every name before anything is written
    if (run.record) require_plain("run name", run.record->name);
  }
  const ExportRoot confined(dir);
  std::vector<std::string> written;
  for (const RunResult& run : set.runs()) {
    if (!run.record) continue;
    const RunRecord& r = *run.record;
    const std::vector<MetricPoint> points = sorted_points(store, r);
    if (points.empty()) continue;
    std::string file;
    {
      std::string event;
      put_double(event, 1, r.started);
      put_uint(event, 2, 0);
      put_bytes(event, 3, "brain.Event:2");
      put_record(file, event);
    }
    auto scalar_event = [&](const std::string& tag, std::int64_t step, double wall, double value) {
      std::string summary;
      put_bytes(summary, 1, scalar_value(tag, value));
      std::string event;
      put_double(event, 1, r.started + wall);
      put_uint(event, 2, static_cast<std::uint64_t>(step));
      put_bytes(event, 5, summary);
      put_record(file, event);
    };
    for (const MetricPoint* at : steps_of(points)) {
      scalar_event("axis/tokens", at->step, at->wall, static_cast<double>(at->tokens));
      scalar_event("axis/cumulative_flops", at->step, at->wall, inherited(r) + at->flops);
    }
    for (const MetricPoint& p : points) scalar_event(p.key, p.step, p.wall, p.value);
    const fs::path path = fs::path(dir) / experiment / r.name /
                          fmt::format("events.out.tfevents.{}.tfw", static_cast<std::int64_t>(std::floor(r.started)));
    // An earlier export of the same run wrote the same name; any other event file there would
    // be read beside ours, so the run's folder holds this one only.
    if (fs::exists(path.parent_path())) {
      confine(path.parent_path());
      for (const auto& entry : fs::directory_iterator(path.parent_path())) {
        if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && entry.path() != path) {
          fs::remove(entry.path());
        }
      }
    }
    write_file(path, file);
    written.push_back(path.string());
  }
  return written;
}

std::vector<std::string> mlflow_write(const ExperimentResults& set, const std::string& dir) {
  Store& store = set.store();
  const std::string& experiment = set.experiment().name;
  const fs::path root = fs::absolute(dir).lexically_normal();
  // Every key is checked before anything is written: a refusal leaves DIR as it was (a refused
  // key left a half-written store of some 60 files).
  for (const RunResult& run : set.runs()) {
    if (!run.record) continue;
    std::map<std::string, std::string> params;
    try {
      flatten(toml::parse(run.record->config), "", params);
    } catch (const toml::parse_error&) {
      continue;  // said below, with the run's name
    }
    for (const auto& [key, value] : params) key_path("parameter", key);
    for (const MetricPoint& p : sorted_points(store, *run.record)) key_path("metric", mlflow_metric_key(p.key));
  }
  const ExportRoot confined(dir);
  const std::string exp_id = mlflow_experiment_id(experiment);
  double created = 0, updated = 0;
  for (const RunResult& run : set.runs()) {
    if (!run.record) continue;
    if (created == 0 || run.record->started < created) created = run.record->started;
    updated = std::max({updated, run.record->ended, run.record->heartbeat});
  }
  if (!fs::exists(root / "0" / "meta.yaml")) {
    write_file(root / "0" / "meta.yaml",
               fmt::format("artifact_location: {}\ncreation_time: {}\neffective_trace_archival_retention: null\n"
                           "experiment_id: '0'\nlast_update_time: {}\nlifecycle_stage: active\nname: Default\n"
                           "trace_location: null\nworkspace: default\n",
                           yaml_quoted("file://" + (root / "0").string()), millis(created), millis(created)));
  }
  write_file(root / exp_id / "meta.yaml",
             fmt::format("artifact_location: {}\ncreation_time: {}\neffective_trace_archival_retention: null\n"
                         "experiment_id: '{}'\nlast_update_time: {}\nlifecycle_stage: active\nname: {}\n"
                         "trace_location: null\nworkspace: default\n",
                         yaml_quoted("file://" + (root / exp_id).string()), millis(created), exp_id, millis(updated),
                         yaml_quoted(experiment)));
  std::vector<std::string> written;
  for (const RunResult& run : set.runs()) {
    if (!run.record) continue;
    const RunRecord& r = *run.record;
    const std::string run_id = mlflow_run_id(experiment, r.name);
    const fs::path run_dir = root / exp_id / run_id;
    confine(run_dir);
    fs::remove_all(run_dir);  // ours (the id is derived from the name): a re-export replaces it whole
    // MLflow finds a run only in a folder with all of these, empty or not.
    for (const char* sub : {"metrics", "params", "tags", "artifacts"}) make_folders(run_dir / sub);
    const bool open = r.status == RunStatus::running || r.status == RunStatus::queued;
    write_file(run_dir / "meta.yaml",
               fmt::format("artifact_uri: {}\nend_time: {}\nentry_point_name: ''\nexperiment_id: '{}'\n"
                           "lifecycle_stage: active\nrun_id: {}\nrun_name: {}\nsource_name: ''\nsource_type: 4\n"
                           "source_version: ''\nstart_time: {}\nstatus: {}\ntags: []\nuser_id: tfw\n",
                           yaml_quoted("file://" + (run_dir / "artifacts").string()),
                           open ? std::string("null") : std::to_string(millis(r.ended)), exp_id, run_id,
                           yaml_quoted(r.name), millis(r.started), mlflow_status(r.status)));
    std::map<std::string, std::string> tags = {
        {"mlflow.runName", r.name},
        {"mlflow.source.name", "tfw"},
        {"mlflow.source.type", "LOCAL"},
        {"mlflow.user", "tfw"},
        {"tfw.experiment", r.experiment},
        {"tfw.family", r.family},
        {"tfw.seed", std::to_string(r.seed)},
        {"tfw.status", status_name(r.status)},
        {"tfw.git_commit", r.git_commit},
        {"tfw.host", r.host},
        {"tfw.parameters", std::to_string(r.parameters)},
        {"tfw.tokens", std::to_string(r.tokens)},
        {"tfw.flops", shortest(r.flops)},
        {"tfw.inherited_flops", shortest(inherited(r))},
        {"tfw.cumulative_flops", shortest(r.cumulative_flops)},
    };
    if (!r.error.empty()) tags["tfw.error"] = r.error;
    if (r.parent != 0) {
      if (std::optional<RunRecord> parent = store.run_get(r.parent)) {
        tags["tfw.parent"] = parent->experiment + "/" + parent->name;
        tags["tfw.growth_method"] = r.growth_method;
        tags["tfw.growth_options"] = r.growth_options;
        tags["tfw.stage"] = std::to_string(r.stage);
        tags["mlflow.parentRunId"] = mlflow_run_id(parent->experiment, parent->name);
      }
    }
    for (const EventRow& e : store.events(r.id)) {
      if (e.kind == "provenance") tags["tfw.provenance"] = e.payload;  // the last one: what produced the run
    }
    for (const auto& [key, value] : tags) write_file(run_dir / "tags" / key_path("tag", key), value);
    std::map<std::string, std::string> params;
    try {
      flatten(toml::parse(r.config), "", params);
    } catch (const toml::parse_error& e) {
      throw Error(with_hint(fmt::format("run {}: its stored config does not parse: {}", r.name, e.description()),
                            "export the other runs, or re-import the run from its bundle"));
    }
    for (const auto& [key, value] : params) write_file(run_dir / "params" / key_path("parameter", key), value);
    const std::vector<MetricPoint> points = sorted_points(store, r);
    std::map<std::string, std::string> metrics;
    for (const MetricPoint* at : steps_of(points)) {
      const std::int64_t t = millis(r.started + at->wall);
      metrics["axis/tokens"] += fmt::format("{} {} {}\n", t, at->tokens, at->step);
      metrics["axis/cumulative_flops"] += fmt::format("{} {} {}\n", t, shortest(inherited(r) + at->flops), at->step);
    }
    for (const MetricPoint& p : points) {
      metrics[mlflow_metric_key(p.key)] +=
          fmt::format("{} {} {}\n", millis(r.started + p.wall), shortest(p.value), p.step);
    }
    for (const auto& [key, lines] : metrics) write_file(run_dir / "metrics" / key_path("metric", key), lines);
    written.push_back(run_dir.string());
  }
  return written;
}

}  // namespace tfw::results
