// The files of a run's checkpoints: listing, verification against the manifest, the newest
// valid one, pruning, and setting damaged ones aside (checkpoint_meta.h). Torch-free: libtfw_core.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/error.h"
#include "engine/core/files.h"

namespace tfw {

namespace fs = std::filesystem;

std::string checkpoint_manifest_path(const std::string& archive) {
  return fs::path(archive).replace_extension(".toml").string();
}

namespace {

toml::table manifest_read(const std::string& archive) {
  const std::string manifest = checkpoint_manifest_path(archive);
  if (!fs::exists(manifest)) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' has no manifest ({}): it is incomplete", archive, manifest),
                               "use an earlier checkpoint of the run"));
  }
  try {
    return toml::parse_file(manifest);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("checkpoint manifest '{}' is corrupt: {}", manifest, e.description()));
  }
}

// The step a checkpoint file's name says ("step-00000080.toml" -> 80), or -1.
std::int64_t step_of_name(const fs::path& path) {
  const std::string stem = path.stem().string();
  if (stem.size() != 13 || stem.rfind("step-", 0) != 0) return -1;
  for (std::size_t i = 5; i < stem.size(); ++i) {
    if (stem[i] < '0' || stem[i] > '9') return -1;
  }
  return std::stoll(stem.substr(5));
}

}  // namespace

std::vector<CheckpointInfo> checkpoint_list(const std::string& dir) {
  std::vector<CheckpointInfo> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& path = entry.path();
    if (path.extension() != ".toml" || step_of_name(path) < 0) continue;
    // The file names are the truth (they are written by rename, never edited); a manifest
    // that says otherwise is listed under its own name and fails verification, loudly.
    CheckpointInfo info;
    // The archive the manifest names: step-N.safetensors, or step-N.pt for a legacy one (whose
    // verification says how to upgrade it). Any other name is listed as .safetensors and fails
    // verification.
    info.path = fs::path(path).replace_extension(kCheckpointExtension).string();
    info.step = step_of_name(path);
    info.val_loss = std::numeric_limits<double>::quiet_NaN();
    try {
      toml::table manifest = toml::parse_file(path.string());
      if (manifest["archive"].value_or(std::string()) == fs::path(path).stem().string() + ".pt") {
        info.path = fs::path(path).replace_extension(".pt").string();
      }
      info.val_loss = manifest["val_loss"].value_or(std::numeric_limits<double>::quiet_NaN());
      info.size = static_cast<std::uint64_t>(manifest["size"].value_or(std::int64_t{0}));
      info.crc32 = static_cast<std::uint32_t>(manifest["crc32"].value_or(std::int64_t{0}));
    } catch (const toml::parse_error&) {
      // Unreadable: kept in the list, so that verification names it instead of skipping it.
    }
    if (fs::exists(info.path)) found.push_back(info);
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

void checkpoint_verify_version(const std::string& path, std::int64_t expected) {
  if (!fs::exists(path)) throw UsageError(fmt::format("checkpoint '{}' not found", path));
  toml::table manifest = manifest_read(path);
  const std::int64_t version = manifest["format_version"].value_or(std::int64_t{0});
  if (version != expected) {
    if (version == kCheckpointLegacyVersion) {
      throw UsageError(with_hint(
          fmt::format("checkpoint '{}' is in the old LibTorch archive format (version 1), which tfw no longer "
                      "loads: loading one can run code stored in it",
                      path),
          fmt::format("convert it once, in place: tfw checkpoints upgrade {}", path)));
    }
    throw UsageError(with_hint(
        fmt::format("checkpoint '{}' has format version {}, this tfw reads version {}", path, version, expected),
        "use the tfw version that wrote it"));
  }
  const std::string archive = manifest["archive"].value_or(std::string());
  const std::int64_t step = manifest["step"].value_or(std::int64_t{-1});
  const std::int64_t named = step_of_name(path);
  if (archive != fs::path(path).filename().string() || (named >= 0 && step != named)) {
    throw UsageError(fmt::format("checkpoint '{}' has a manifest that does not match it (archive '{}', step {})", path,
                                 archive, step));
  }
  const auto size = static_cast<std::uint64_t>(manifest["size"].value_or(std::int64_t{-1}));
  const auto actual_size = static_cast<std::uint64_t>(fs::file_size(path));
  if (actual_size != size) {
    throw UsageError(fmt::format("checkpoint '{}' is truncated or altered: {} bytes, its manifest says {}", path,
                                 actual_size, size));
  }
  const auto crc = static_cast<std::uint32_t>(manifest["crc32"].value_or(std::int64_t{0}));
  if (file_crc32(path) != crc) {
    throw UsageError(fmt::format("checkpoint '{}' is corrupt: its CRC-32 does not match its manifest", path));
  }
}

void checkpoint_verify(const std::string& path) { checkpoint_verify_version(path, kCheckpointFormatVersion); }

CheckpointInfo checkpoint_latest_valid(const std::string& dir, std::vector<std::string>* skipped,
                                       CheckpointMeta* meta) {
  std::vector<CheckpointInfo> all = checkpoint_list(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      const CheckpointMeta read = checkpoint_read_meta(it->path);  // verifies, and the archive itself must load
      if (meta != nullptr) *meta = read;
      return *it;
    } catch (const UsageError& e) {
      // A legacy checkpoint is not damaged: skipping it would resume from an older one, or
      // start the run again. Its error says how to upgrade it.
      if (fs::path(it->path).extension() == ".pt") throw;
      if (skipped != nullptr) skipped->push_back(e.what());
    }
  }
  throw UsageError(with_hint(
      fmt::format("'{}' holds no valid checkpoint{}", dir, all.empty() ? "" : fmt::format(" ({} damaged)", all.size())),
      "the run has nothing to resume from: start it again (its record is replaced)"));
}

std::vector<std::string> checkpoint_prune(const std::string& dir, std::int64_t keep) {
  std::vector<std::string> removed;
  std::vector<CheckpointInfo> all = checkpoint_list(dir);
  if (static_cast<std::int64_t>(all.size()) <= keep) return removed;
  std::int64_t best_step = -1;
  double best = std::numeric_limits<double>::infinity();
  for (const CheckpointInfo& info : all) {
    if (std::isfinite(info.val_loss) && info.val_loss < best) {
      best = info.val_loss;
      best_step = info.step;
    }
  }
  for (std::size_t i = 0; i + keep < all.size(); ++i) {
    if (all[i].step == best_step) continue;
    fs::remove(checkpoint_manifest_path(all[i].path));  // manifest first: the archive is then ignored
    fs::remove(all[i].path);
    removed.push_back(all[i].path);
  }
  return removed;
}

std::vector<std::string> checkpoint_set_aside_newer(const std::string& dir, std::int64_t step) {
  std::vector<std::string> moved;
  for (const CheckpointInfo& newer : checkpoint_list(dir)) {
    if (newer.step <= step) continue;
    std::error_code ec;
    const std::string manifest = checkpoint_manifest_path(newer.path);
    fs::rename(manifest, manifest + ".damaged", ec);  // manifest first
    fs::rename(newer.path, newer.path + ".damaged", ec);
    moved.push_back(newer.path);
  }
  return moved;
}

}  // namespace tfw
