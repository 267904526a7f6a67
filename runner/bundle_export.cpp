// Run bundles, export (bundle.h, docs/store.md "Run bundles"): `tfw runs export` choosing the
// runs (named ones or an experiment's, with their ancestors), ordering them parents first,
// and writing their lines and checkpoint files as one gzip stream, atomically.
#include "runner/bundle.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/core/sha256.h"
#include "runner/bundle_parts.h"

namespace tfw::runner {

using namespace bundle_parts;

namespace {

// The checkpoint files of a run that travel with --checkpoints: each row's file and its
// manifest, when they exist.
std::vector<std::string> checkpoint_files(Store& store, const RunRecord& r) {
  std::vector<std::string> files;
  for (const CheckpointRow& c : store.checkpoints(r.id)) {
    const fs::path file(c.path);
    if (!checkpoint_file_name_ok(file.filename().string())) continue;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      throw UsageError(with_hint(fmt::format("run '{}': its checkpoint {} is missing", r.name, c.path),
                                 "export without --checkpoints, or restore the file"));
    }
    files.push_back(file.string());
    const fs::path manifest = fs::path(file).replace_extension(".toml");
    if (fs::is_regular_file(manifest, ec)) files.push_back(manifest.string());
  }
  return files;
}

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  return hash.hex();
}

class GzWriter {
 public:
  explicit GzWriter(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "wb6")) {
    if (file_ == nullptr) {
      throw UsageError(with_hint(fmt::format("cannot write the bundle {}", path), "choose a writable --out"));
    }
  }
  ~GzWriter() {
    if (file_ != nullptr) gzclose(file_);
  }
  void write(const char* data, std::size_t bytes) {
    while (bytes > 0) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes, 1 << 30));
      if (gzwrite(file_, data, chunk) != static_cast<int>(chunk)) {
        int code = 0;
        throw Error(fmt::format("writing the bundle {} failed: {}", path_, gzerror(file_, &code)));
      }
      data += chunk;
      bytes -= chunk;
    }
  }
  void line(const std::string& text) {
    write(text.data(), text.size());
    write("\n", 1);
  }
  void close() {
    const int rc = gzclose(file_);
    file_ = nullptr;
    if (rc != Z_OK) throw Error(fmt::format("writing the bundle {} failed (zlib {})", path_, rc));
  }

 private:
  std::string path_;
  gzFile file_;
};

// Parents before the runs grown from them; then by experiment and name.
std::vector<RunRecord> bundle_order(Store& store, std::map<std::int64_t, RunRecord> chosen) {
  std::vector<std::pair<std::size_t, RunRecord>> keyed;
  for (auto& [id, r] : chosen) keyed.emplace_back(store.lineage(id).size(), r);
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second.experiment, a.second.name) <
           std::tie(b.first, b.second.experiment, b.second.name);
  });
  std::vector<RunRecord> out;
  for (auto& [depth, r] : keyed) out.push_back(std::move(r));
  return out;
}

}  // namespace

BundleSummary bundle_export(Store& store, const BundleExport& what, const std::string& out) {
  if (what.runs.empty() == what.experiment.empty()) {
    throw UsageError(with_hint("tfw runs export needs runs or --experiment NAME (not both)",
                               "tfw runs export RUN... --out FILE, or tfw runs export --experiment NAME --out FILE"));
  }
  BundleSummary summary;
  std::map<std::int64_t, RunRecord> chosen;
  std::set<std::int64_t> named;
  auto running = [](const RunRecord& r) { return r.status == RunStatus::running || r.status == RunStatus::queued; };
  if (!what.experiment.empty()) {
    RunFilter filter;
    filter.experiment = what.experiment;
    const std::vector<RunRecord> runs = store.runs(filter);
    if (runs.empty()) {
      throw UsageError(with_hint(fmt::format("experiment '{}' has no runs in {}", what.experiment, store.path()),
                                 "tfw runs list shows the experiments' runs"));
    }
    for (const RunRecord& r : runs) {
      if (running(r)) {
        summary.skipped.push_back(fmt::format("{} ({})", run_label(r.experiment, r.name), status_name(r.status)));
        continue;
      }
      chosen[r.id] = r;
      named.insert(r.id);
    }
  } else {
    for (const std::string& id : what.runs) {
      std::optional<RunRecord> r = store.run_find(id);
      if (!r)
        throw UsageError(with_hint(fmt::format("no run '{}' in {}", id, store.path()), "tfw runs list shows the runs"));
      if (running(*r)) {
        throw UsageError(with_hint(fmt::format("run {} '{}' is {}; a bundle holds runs that have stopped", r->id,
                                               r->name, status_name(r->status)),
                                   "export it when it has finished (or stop it: a stopped run exports as killed)"));
      }
      chosen[r->id] = *r;
      named.insert(r->id);
    }
  }
  // Lineage travels whole: the ancestors of every chosen run come too.
  for (const auto& [id, r] : std::map<std::int64_t, RunRecord>(chosen)) {
    for (const RunRecord& a : store.lineage(id)) {
      if (chosen.count(a.id)) continue;
      if (running(a)) {
        throw UsageError(with_hint(fmt::format("run '{}' was grown from run {} '{}', which is {}", r.name, a.id, a.name,
                                               status_name(a.status)),
                                   "export it when its parent has stopped"));
      }
      chosen[a.id] = a;
    }
  }
  if (chosen.empty()) {
    throw UsageError(with_hint(fmt::format("experiment '{}' has no stopped runs yet", what.experiment),
                               "export it when a run has finished"));
  }
  const std::vector<RunRecord> ordered = bundle_order(store, chosen);

  // Its folder is made, as every other --out makes its own.
  if (const fs::path folder = fs::path(out).parent_path(); !folder.empty()) {
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec)
      throw UsageError(
          with_hint(fmt::format("cannot make the folder {} for the bundle: {}", folder.string(), ec.message()),
                    "choose a writable --out"));
  }
  const std::string temporary = fmt::format("{}.tmp-{}", out, ::getpid());
  std::int64_t files_total = 0;
  std::vector<std::pair<json, std::vector<std::string>>> lines;
  for (const RunRecord& r : ordered) {
    std::vector<std::string> files = what.checkpoints ? checkpoint_files(store, r) : std::vector<std::string>{};
    files_total += static_cast<std::int64_t>(files.size());
    json object = run_object(store, r);
    lines.emplace_back(std::move(object), std::move(files));
    summary.runs.push_back(run_label(r.experiment, r.name));
    if (!named.count(r.id)) summary.ancestors.push_back(run_label(r.experiment, r.name));
  }
  try {
    GzWriter writer(temporary);
    writer.line(json{{"format", kBundleFormat},
                     {"format_version", kBundleFormatVersion},
                     {"runs", lines.size()},
                     {"files", files_total}}
                    .dump());
    for (const auto& [object, files] : lines) {
      const std::string text = canonical(object);
      json listed = json::array();
      for (const std::string& f : files) {
        listed.push_back(
            json{{"name", fs::path(f).filename().string()}, {"bytes", fs::file_size(f)}, {"sha256", file_sha256(f)}});
      }
      // The object's text is written as hashed: `{"files":...,"run":<text>,"sha256":...}`.
      writer.line(R"({"files":)" + listed.dump() + R"(,"run":)" + text + R"(,"sha256":")" + sha256_hex(text) + "\"}");
      for (std::size_t i = 0; i < files.size(); ++i) {
        std::ifstream in(files[i], std::ios::binary);
        std::vector<char> buffer(1 << 20);
        std::uint64_t left = listed[i]["bytes"].get<std::uint64_t>();
        while (left > 0 && in) {
          in.read(buffer.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(left, buffer.size())));
          const auto got = static_cast<std::size_t>(in.gcount());
          writer.write(buffer.data(), got);
          left -= got;
        }
        if (left != 0) throw Error(fmt::format("{} changed while it was exported", files[i]));
      }
      summary.files += static_cast<std::int64_t>(files.size());
    }
    writer.line(json{{"end", {{"runs", lines.size()}, {"files", files_total}}}}.dump());
    writer.close();
    path_fsync(temporary);
    fs::rename(temporary, out);
  } catch (...) {
    std::error_code ec;
    fs::remove(temporary, ec);
    throw;
  }
  summary.bytes = fs::file_size(out);
  return summary;
}

}  // namespace tfw::runner
