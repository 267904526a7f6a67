// Run bundles, import (bundle.h, docs/store.md "Run bundles"): `tfw runs import` reading a
// bundle's gzip stream within its limits, checking every line (format, version, sizes, hashes,
// names) and staging its files, then checking lineage and clashes against the home and writing
// the new runs into its store in one transaction.
#include "runner/bundle.h"

#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/core/home.h"
#include "engine/core/json_bounded.h"
#include "engine/core/sha256.h"
#include "runner/bundle_parts.h"
#include "runner/lineage.h"

namespace tfw::runner {

using namespace bundle_parts;

namespace {

// Reads a bundle's gzip stream: bounded lines and exact byte runs.
class GzReader {
 public:
  GzReader(const std::string& path, const BundleLimits& limits)
      : path_(path), limits_(limits), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) {
      throw UsageError(with_hint(fmt::format("cannot open the bundle {}", path), "check the path"));
    }
  }
  ~GzReader() { gzclose(file_); }
  bool direct() { return gzdirect(file_) != 0; }

  // The next line (without its newline); nullopt at the end of the stream.
  std::optional<std::string> line(std::size_t limit, const std::string& what) {
    std::string out;
    for (;;) {
      if (pos_ == buffer_.size() && !fill()) {
        if (out.empty()) return std::nullopt;
        return out;  // a last line without its newline: the caller finds it incomplete
      }
      const auto begin = buffer_.begin() + static_cast<std::ptrdiff_t>(pos_);
      const auto newline = std::find(begin, buffer_.end(), '\n');
      const std::size_t take = static_cast<std::size_t>(newline - begin);
      if (out.size() + take > limit) {
        throw UsageError(
            with_hint(fmt::format("bundle {}: {} is longer than {} bytes; nothing was imported", path_, what, limit),
                      "the file is not a tfw bundle, or it is damaged"));
      }
      out.append(begin, newline);
      pos_ += take;
      if (newline != buffer_.end()) {
        pos_ += 1;
        return out;
      }
    }
  }

  // Exactly `bytes` bytes, handed to `sink` in pieces.
  void bytes(std::uint64_t bytes, const std::function<void(const char*, std::size_t)>& sink, const std::string& what) {
    while (bytes > 0) {
      if (pos_ == buffer_.size() && !fill()) {
        throw UsageError(with_hint(fmt::format("bundle {} ends inside {}; nothing was imported", path_, what),
                                   "the file is truncated: copy it again"));
      }
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, buffer_.size() - pos_));
      sink(buffer_.data() + pos_, take);
      pos_ += take;
      bytes -= take;
    }
  }

 private:
  bool fill() {
    buffer_.resize(1 << 20);
    const int got = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    if (got < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      throw UsageError(with_hint(
          fmt::format("bundle {} is damaged (zlib: {}); nothing was imported", path_, message ? message : "unreadable"),
          "the file is truncated or corrupt: copy or export it again"));
    }
    buffer_.resize(static_cast<std::size_t>(got));
    pos_ = 0;
    // A decompression bomb: 2 MB of deflated zeros wrote a 2 GiB file into the
    // home. Past a floor, the bytes out may be at most expansion_ratio times the bytes read.
    inflated_ += static_cast<std::uint64_t>(got);
    const z_off_t read = gzoffset(file_);
    if (inflated_ > limits_.expansion_floor && read > 0 &&
        inflated_ / static_cast<std::uint64_t>(read) >= limits_.expansion_ratio) {
      throw UsageError(with_hint(fmt::format("bundle {} expands more than {} times ({} bytes from the first {} of the "
                                             "file): refused as a decompression bomb; nothing was imported",
                                             path_, limits_.expansion_ratio, inflated_, read),
                                 "a bundle `tfw runs export` wrote expands a few times at most (checkpoints hardly "
                                 "compress); export it again"));
    }
    return got > 0;
  }
  std::string path_;
  const BundleLimits& limits_;
  gzFile file_;
  std::uint64_t inflated_ = 0;
  std::vector<char> buffer_;
  std::size_t pos_ = 0;
};

// A run as read from a bundle, checked, with its files staged.
struct IncomingRun {
  RunRecord record;
  std::string parent_label;  // "" for none
  std::vector<MetricPoint> metrics;
  std::vector<EventRow> events;
  std::vector<CheckpointRow> checkpoints;  // path: the file name
  std::vector<EvaluationRow> evaluations;  // checkpoint: the file name
  std::string hash;
  std::vector<std::pair<std::string, std::string>> files;  // name, staged path
};

class RunReader {
 public:
  RunReader(std::string bundle, std::string where) : bundle_(std::move(bundle)), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw UsageError(with_hint(fmt::format("bundle {}: {}: {}", bundle_, where_, problem),
                               "the bundle is damaged or was not written by tfw runs export; nothing was imported"));
  }
  const json& at(const json& object, const char* key) const {
    if (!object.is_object() || !object.contains(key)) fail(fmt::format("'{}' is missing", key));
    return object.at(key);
  }
  std::string text(const json& object, const char* key, std::size_t limit = 1 << 24) const {
    const json& v = at(object, key);
    if (!v.is_string()) fail(fmt::format("'{}' must be a string", key));
    if (v.get_ref<const std::string&>().size() > limit) fail(fmt::format("'{}' is longer than {} bytes", key, limit));
    return v.get<std::string>();
  }
  std::int64_t integer_value(const json& v, const std::string& key) const {
    if (!v.is_number_integer()) fail(fmt::format("'{}' must be an integer", key));
    return v.get<std::int64_t>();
  }
  double real_value(const json& v, const std::string& key) const {
    if (!v.is_number()) fail(fmt::format("'{}' must be a number", key));
    const double x = v.get<double>();
    if (!std::isfinite(x)) fail(fmt::format("'{}' must be finite", key));
    return x;
  }
  std::int64_t integer(const json& object, const char* key) const { return integer_value(at(object, key), key); }
  double real(const json& object, const char* key) const { return real_value(at(object, key), key); }
  const json& array(const json& v, const std::string& key, std::size_t size = 0) const {
    if (!v.is_array() || (size != 0 && v.size() != size)) {
      fail(size ? fmt::format("'{}' must be an array of {}", key, size) : fmt::format("'{}' must be an array", key));
    }
    return v;
  }

  IncomingRun run(const json& object) const {
    IncomingRun in;
    RunRecord& r = in.record;
    r.experiment = text(object, "experiment", 256);
    r.name = text(object, "name", 256);
    if (!name_ok(r.experiment) || !name_ok(r.name))
      fail(fmt::format("'{}/{}' is not a valid run name", r.experiment, r.name));
    r.family = text(object, "family", 256);
    r.config = text(object, "config");
    const std::optional<RunStatus> status = run_status_parse(text(object, "status", 32));
    if (!status || *status == RunStatus::running || *status == RunStatus::queued)
      fail("'status' must be a stopped run's");
    r.status = *status;
    r.heartbeat = real(object, "heartbeat");
    r.seed = integer(object, "seed");
    r.git_commit = text(object, "git_commit", 256);
    r.host = text(object, "host", 1024);
    r.started = real(object, "started");
    r.ended = real(object, "ended");
    const json& parent = at(object, "parent");
    if (!parent.is_null()) {
      const std::string e = text(parent, "experiment", 256), n = text(parent, "name", 256);
      if (!name_ok(e) || !name_ok(n)) fail("'parent' is not a valid run name");
      in.parent_label = run_label(e, n);
    }
    r.growth_method = text(object, "growth_method", 256);
    r.growth_options = text(object, "growth_options");
    r.stage = integer(object, "stage");
    r.parameters = integer(object, "parameters");
    r.tokens = integer(object, "tokens");
    r.flops = real(object, "flops");
    r.inherited_flops = real(object, "inherited_flops");
    r.cumulative_flops = real(object, "cumulative_flops");
    std::string final_metrics = text(object, "final_metrics");
    if (!json::accept(final_metrics)) fail("'final_metrics' must hold a JSON object");
    r.final_metrics = FinalMetrics::from_text(std::move(final_metrics));
    r.error = text(object, "error");
    const json& metrics = at(object, "metrics");
    if (!metrics.is_object()) fail("'metrics' must be an object");
    for (const auto& [key, points] : metrics.items()) {
      if (key.empty() || key.size() > 256) fail("a metric key is empty or longer than 256 bytes");
      // SQLite's text stops at a NUL: such a key read back cut short, and the import "differed".
      if (std::any_of(key.begin(), key.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
        fail("a metric key holds a control character (a NUL, a newline)");
      }
      for (const json& p : array(points, key)) {
        array(p, key, 5);
        const double value = p[4].is_null() ? std::nan("") : real_value(p[4], key);
        in.metrics.push_back({0, key, integer_value(p[0], key), integer_value(p[1], key), real_value(p[2], key),
                              real_value(p[3], key), value});
      }
    }
    for (const json& e : array(at(object, "events"), "events")) {
      array(e, "events", 4);
      if (!e[0].is_string() || !e[3].is_string()) fail("an event's kind and payload must be strings");
      in.events.push_back({0, integer_value(e[1], "events"), e[0].get<std::string>(), e[3].get<std::string>(),
                           real_value(e[2], "events"), 0});
    }
    for (const json& c : array(at(object, "checkpoints"), "checkpoints")) {
      array(c, "checkpoints", 4);
      if (!c[1].is_string() || !c[2].is_string()) fail("a checkpoint's file and checksum must be strings");
      const std::string file = c[1].get<std::string>();
      if (!checkpoint_file_name_ok(file))
        fail(fmt::format("checkpoint file name '{}' is not step-N.safetensors", file));
      in.checkpoints.push_back(
          {0, integer_value(c[0], "checkpoints"), integer_value(c[3], "checkpoints"), file, c[2].get<std::string>()});
    }
    if (object.contains("evaluations")) {  // optional: absent where the run has none
      for (const json& e : array(at(object, "evaluations"), "evaluations")) {
        array(e, "evaluations", 10);
        for (const int i : {0, 2, 3, 7, 9}) {
          if (!e[i].is_string() || e[i].get_ref<const std::string&>().size() > 256) {
            fail("an evaluation's checkpoint, corpus, metric, mode and blocks must be strings of at most 256 bytes");
          }
        }
        const std::string file = e[0].get<std::string>();
        if (!checkpoint_file_name_ok(file))
          fail(fmt::format("evaluated checkpoint '{}' is not step-N.safetensors", file));
        EvaluationRow row;
        row.checkpoint = file;
        row.step = integer_value(e[1], "evaluations");
        row.corpus = e[2].get<std::string>();
        row.metric = e[3].get<std::string>();
        row.value = e[4].is_null() ? std::nan("") : real_value(e[4], "evaluations");
        row.windows = integer_value(e[5], "evaluations");
        row.tokens = integer_value(e[6], "evaluations");
        row.mode = e[7].get<std::string>();
        row.created = real_value(e[8], "evaluations");
        row.blocks = e[9].get<std::string>();
        in.evaluations.push_back(std::move(row));
      }
    }
    return in;
  }

 private:
  std::string bundle_, where_;
};

// What differs between two runs' bundle objects, for a clash's message.
std::string differing_fields(const json& a, const json& b) {
  std::string out;
  for (const auto& [key, value] : a.items()) {
    if (!b.contains(key) || b.at(key) != value) out += (out.empty() ? "" : ", ") + key;
  }
  return out.empty() ? "their content" : out;
}

// Removes what an import wrote to the file system when it does not complete.
struct Undo {
  std::vector<fs::path> files, dirs;
  bool armed = true;
  ~Undo() {
    if (!armed) return;
    std::error_code ec;
    for (auto it = files.rbegin(); it != files.rend(); ++it) fs::remove(*it, ec);
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) fs::remove(*it, ec);  // only if empty
  }
};

std::vector<IncomingRun> read_bundle(const std::string& bundle, const BundleLimits& limits, const std::string& staging,
                                     std::map<std::string, json>& objects) {
  GzReader reader(bundle, limits);
  const auto refuse = [&](const std::string& problem, const std::string& hint) {
    throw UsageError(with_hint(fmt::format("bundle {}: {}; nothing was imported", bundle, problem), hint));
  };
  const std::string not_bundle = "name a file that `tfw runs export` wrote";
  const std::optional<std::string> first = reader.line(limits.header_bytes, "the header line");
  if (reader.direct()) refuse("it is not a tfw bundle (not gzip-compressed)", not_bundle);
  json header;
  if (first) json_parse_bounded(*first, {limits.depth, 1 << 12, 1 << 14}, header);
  if (!header.is_object() || header.value("format", json()) != kBundleFormat ||
      !header.value("format_version", json()).is_number_integer()) {
    refuse("it is not a tfw bundle (its first line is not a bundle header)", not_bundle);
  }
  const std::int64_t version = header["format_version"].get<std::int64_t>();
  if (version > kBundleFormatVersion || version < 1) {
    refuse(fmt::format("its format version is {}, and this tfw reads version {}", version, kBundleFormatVersion),
           "import it with the newer tfw that wrote it, or export it again with this one");
  }
  const json runs_declared = header.value("runs", json()), files_declared = header.value("files", json());
  if (!runs_declared.is_number_unsigned() || runs_declared.get<std::int64_t>() > limits.runs ||
      !files_declared.is_number_unsigned()) {
    refuse(fmt::format("its header declares an invalid number of runs (at most {}) or files", limits.runs), not_bundle);
  }
  std::vector<IncomingRun> runs;
  std::int64_t files_seen = 0;
  std::set<std::string> labels;
  for (std::int64_t index = 0;; ++index) {
    const std::string where = fmt::format("line {}", index + 2);
    const std::optional<std::string> line = reader.line(limits.run_bytes, where);
    if (!line) refuse("it ends before its last line", "the file is truncated: copy or export it again");
    json parsed;
    const std::string why = json_parse_bounded(*line, {limits.depth, limits.run_containers, limits.run_values}, parsed);
    if (why.rfind("is not valid JSON", 0) == 0 || (why.empty() && !parsed.is_object())) {
      refuse(fmt::format("{} is not JSON", where), not_bundle);
    }
    if (!why.empty()) refuse(fmt::format("{} {}", where, why), not_bundle);
    if (parsed.contains("end")) {
      const json& end = parsed["end"];
      if (!end.is_object() || end.value("runs", json()) != json(runs.size()) ||
          end.value("files", json()) != json(files_seen) || runs_declared != json(runs.size()) ||
          files_declared != json(files_seen)) {
        refuse("its runs or files do not add up to what its header and last line declare",
               "the file is damaged: export it again");
      }
      if (reader.line(1, "after its last line")) refuse("it has data after its last line", not_bundle);
      return runs;
    }
    if (static_cast<std::int64_t>(runs.size()) >= runs_declared.get<std::int64_t>()) {
      refuse("it holds more runs than its header declares", "the file is damaged: export it again");
    }
    RunReader check(bundle, where);
    if (!parsed.contains("run") || !parsed.contains("sha256") || !parsed["sha256"].is_string()) {
      check.fail("a run line needs 'run' and 'sha256'");
    }
    // The hash covers the run object's text exactly as written in the line.
    const std::string hash = object_hash(parsed["run"]);
    if (hash != parsed["sha256"].get<std::string>()) {
      refuse(fmt::format("{}: the run's content hash is {}, but the line says {}", where, hash,
                         parsed["sha256"].get<std::string>()),
             "the file was altered or damaged: export it again");
    }
    IncomingRun in = check.run(parsed["run"]);
    in.hash = hash;
    const std::string label = run_label(in.record.experiment, in.record.name);
    if (!labels.insert(label).second) check.fail(fmt::format("run '{}' appears twice", label));
    if (in.parent_label == label) check.fail(fmt::format("run '{}' names itself as its parent", label));
    if (!in.parent_label.empty() && !labels.count(in.parent_label)) {
      // The parent must come first; one that is not in the bundle must be in the home (checked later).
      in.parent_label = "?" + in.parent_label;
    }
    const json& files = check.array(check.at(parsed, "files"), "files");
    if (static_cast<std::int64_t>(files.size()) > limits.files_per_run) {
      check.fail(fmt::format("more than {} files", limits.files_per_run));
    }
    std::set<std::string> names;
    for (const json& f : files) {
      const std::string name = check.text(f, "name", 64);
      if (!names.insert(name).second) check.fail(fmt::format("file {} appears twice", name));
      const std::int64_t bytes = check.integer(f, "bytes");
      const std::string expected = check.text(f, "sha256", 64);
      if (!checkpoint_file_name_ok(name)) check.fail(fmt::format("file name '{}' is not a checkpoint's", name));
      if (bytes < 0 || static_cast<std::uint64_t>(bytes) > limits.file_bytes) {
        check.fail(fmt::format("file {} declares {} bytes (at most {})", name, bytes, limits.file_bytes));
      }
      const std::string staged = fmt::format("{}/{}-{}", staging, runs.size(), name);
      std::ofstream out(staged, std::ios::binary | std::ios::trunc);
      Sha256 file_hash;
      reader.bytes(
          static_cast<std::uint64_t>(bytes),
          [&](const char* data, std::size_t n) {
            file_hash.update(data, n);
            out.write(data, static_cast<std::streamsize>(n));
          },
          fmt::format("{}'s file {}", label, name));
      out.close();
      if (!out) throw Error(fmt::format("cannot write {} while importing (is the disk full?)", staged));
      if (file_hash.hex() != expected) {
        refuse(fmt::format("{}'s file {} does not match its hash", label, name),
               "the file is damaged: export it again");
      }
      in.files.emplace_back(name, staged);
      files_seen += 1;
    }
    objects[label] = std::move(parsed["run"]);
    runs.push_back(std::move(in));
  }
}

// An import that did not finish (Ctrl-C, SIGTERM, SIGKILL) leaves its staging folder
// TFW_HOME/.import-PID, whose journal `placed` lists the run folders it had made in the home
// (experiment, name and folder, one per line, written before the folder). The store rolled its
// rows back, so a listed folder whose run the store does not know is debris: the next import
// removes it, then the staging folder. A staging folder of a live process is left alone.
void sweep_dead_imports(const std::string& home, Store& store) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(home, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".import-", 0) != 0 || !entry.is_directory(ec)) continue;
    const std::string digits = name.substr(8);
    if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::ifstream journal(entry.path() / "placed");
    for (std::string line; std::getline(journal, line);) {
      const std::size_t a = line.find('\t'), b = line.find('\t', a == std::string::npos ? a : a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const std::string experiment = line.substr(0, a), run = line.substr(a + 1, b - a - 1), dir = line.substr(b + 1);
      if (!store.run_in_experiment(experiment, run) && dir == run_dir_of(home, experiment, run) &&
          path_inside(dir, home)) {
        fs::remove_all(dir, ec);
      }
    }
    fs::remove_all(entry.path(), ec);
  }
}

// The bundle's runs checked against the home before anything is written: a parent outside
// the bundle must be in the home; a run the home holds already must be the same (then it is
// left as it is, `ids` gets its id); a new run's folder must lie inside the home and hold no
// checkpoints. Returns the runs to import; UsageError (nothing imported) otherwise.
std::vector<IncomingRun*> runs_to_import(const std::string& bundle, const std::string& home, Store& store,
                                         std::map<std::string, json>& objects, std::vector<IncomingRun>& runs,
                                         BundleSummary& summary, std::map<std::string, std::int64_t>& ids) {
  std::error_code ec;
  std::vector<IncomingRun*> fresh;
  for (IncomingRun& in : runs) {
    const std::string label = run_label(in.record.experiment, in.record.name);
    summary.runs.push_back(label);
    if (!in.parent_label.empty() && in.parent_label[0] == '?') {
      const std::string parent = in.parent_label.substr(1);
      const std::size_t slash = parent.find('/');
      if (!store.run_in_experiment(parent.substr(0, slash), parent.substr(slash + 1))) {
        throw UsageError(with_hint(fmt::format("bundle {}: run '{}' was grown from '{}', which is neither in the "
                                               "bundle nor in {}; nothing was imported",
                                               bundle, label, parent, home),
                                   "export the run again: tfw runs export takes a run's ancestors with it"));
      }
      in.parent_label = parent;
    }
    if (std::optional<RunRecord> existing = store.run_in_experiment(in.record.experiment, in.record.name)) {
      const json mine = run_object(store, *existing);
      if (object_hash(mine) == in.hash) {
        ids[label] = existing->id;
        summary.unchanged.push_back(label);
        continue;
      }
      throw UsageError(with_hint(
          fmt::format("bundle {}: run '{}' differs from run {} '{}' of {} ({} differ); nothing was imported", bundle,
                      label, existing->id, existing->name, home, differing_fields(objects[label], mine)),
          fmt::format("import into another home (--home), or delete that run first (tfw runs delete {})",
                      existing->id)));
    }
    const std::string run_dir = run_dir_of(home, in.record.experiment, in.record.name);
    // A link planted in the home (runs/EXP, the run's folder or its checkpoints/) would carry
    // the files outside it: every folder on the way must resolve inside the home.
    for (const std::string& dir : {run_dir, run_dir + "/checkpoints"}) {
      if (fs::is_symlink(dir, ec) || !path_inside(dir, home)) {
        throw UsageError(with_hint(fmt::format("bundle {}: run '{}' would be written to {}, which leads outside {} "
                                               "(a symbolic link); nothing was imported",
                                               bundle, label, dir, home),
                                   "remove the link, or import into another home (--home)"));
      }
    }
    if (fs::exists(run_dir + "/checkpoints", ec) && !fs::is_empty(run_dir + "/checkpoints", ec)) {
      throw UsageError(with_hint(fmt::format("bundle {}: run '{}' is not in the store of {}, but its folder {} holds "
                                             "checkpoints; nothing was imported",
                                             bundle, label, home, run_dir),
                                 "move that folder away, or import into another home (--home)"));
    }
    in.record.run_dir = run_dir;
    fresh.push_back(&in);
  }
  return fresh;
}

}  // namespace

BundleSummary bundle_import(const std::string& bundle, const std::string& home, const BundleLimits& limits) {
  std::error_code ec;
  if (!fs::is_regular_file(bundle, ec)) {
    throw UsageError(with_hint(fmt::format("bundle {} does not exist or is not a file", bundle), "check the path"));
  }
  fs::create_directories(home, ec);
  const std::string staging = fmt::format("{}/.import-{}", home, ::getpid());
  fs::create_directories(staging, ec);
  if (ec)
    throw UsageError(with_hint(fmt::format("cannot write in {}: {}", home, ec.message()), "choose a writable --home"));
  struct Sweep {
    std::string dir;
    ~Sweep() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } sweep{staging};

  std::map<std::string, json> objects;
  std::vector<IncomingRun> runs = read_bundle(bundle, limits, staging, objects);

  auto store = Store::open(home + "/runs.db");
  sweep_dead_imports(home, *store);
  std::ofstream placed(staging + "/placed", std::ios::app);  // the journal sweep_dead_imports reads
  BundleSummary summary;
  std::map<std::string, std::int64_t> ids;  // label -> id in this home
  const std::vector<IncomingRun*> fresh = runs_to_import(bundle, home, *store, objects, runs, summary, ids);

  Undo undo;
  store->transaction([&] {
    for (IncomingRun* in : fresh) {
      RunRecord record = in->record;
      record.parent = 0;
      if (auto known = ids.find(in->parent_label); known != ids.end()) {
        record.parent = known->second;
      } else if (!in->parent_label.empty()) {
        const std::optional<RunRecord> parent =
            store->run_in_experiment(in->parent_label.substr(0, in->parent_label.find('/')),
                                     in->parent_label.substr(in->parent_label.find('/') + 1));
        if (!parent) {  // checked above; kept so that no path reads an empty optional
          throw UsageError(
              fmt::format("bundle {}: run '{}' names parent '{}', which is not in {}; nothing was imported", bundle,
                          run_label(record.experiment, record.name), in->parent_label, home));
        }
        record.parent = parent->id;
      }
      const std::int64_t id = store->run_insert(record);
      ids[run_label(record.experiment, record.name)] = id;
      for (MetricPoint& p : in->metrics) p.run = id;
      store->metrics_append(in->metrics);
      for (EventRow& e : in->events) {
        e.run = id;
        store->event_add(e);
      }
      const fs::path checkpoints = fs::path(record.run_dir) / "checkpoints";
      if (!fs::exists(record.run_dir)) {
        placed << record.experiment << '\t' << record.name << '\t' << record.run_dir << std::endl;
        path_fsync(staging + "/placed");
      }
      for (const fs::path& dir : {fs::path(record.run_dir), checkpoints}) {
        if (!fs::exists(dir)) {
          fs::create_directories(dir);
          undo.dirs.push_back(dir);
        }
      }
      for (CheckpointRow& c : in->checkpoints) {
        c.run = id;
        c.path = (checkpoints / c.path).string();
        store->checkpoint_add(c);
      }
      for (EvaluationRow& e : in->evaluations) {
        e.run = id;
        e.checkpoint = (checkpoints / e.checkpoint).string();
      }
      store->evaluations_add(in->evaluations);
      for (const auto& [name, staged] : in->files) {
        const fs::path target = checkpoints / name;
        fs::rename(staged, target);
        undo.files.push_back(target);
      }
      // The run's config beside its checkpoints, as a run folder has it (`--resume` reads it).
      const fs::path config = fs::path(record.run_dir) / "config.toml";
      if (!fs::exists(config)) {
        file_write_durably(config.string(), record.config.data(), record.config.size());
        undo.files.push_back(config);
      }
    }
  });
  undo.armed = false;
  summary.files = 0;
  for (IncomingRun* in : fresh) summary.files += static_cast<std::int64_t>(in->files.size());
  summary.bytes = fs::file_size(bundle);
  return summary;
}

}  // namespace tfw::runner
