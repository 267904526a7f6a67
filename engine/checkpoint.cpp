// Checkpoint files. See checkpoint.h.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/error.h"
#include "engine/files.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

std::uint32_t file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(1 << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(in.gcount()));
  }
  return static_cast<std::uint32_t>(crc);
}

std::string manifest_of(const std::string& archive) { return fs::path(archive).replace_extension(".toml").string(); }

toml::table manifest_read(const std::string& archive) {
  const std::string manifest = manifest_of(archive);
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

torch::Tensor torch_rng_state() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void torch_rng_state_set(const torch::Tensor& state) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

void read_into(torch::serialize::InputArchive& archive, const char* key, c10::IValue& value) {
  if (!archive.try_read(key, value)) throw UsageError(fmt::format("checkpoint lacks '{}'", key));
}

}  // namespace

CheckpointInfo checkpoint_save(const std::string& dir, LanguageModel& model, torch::optim::Optimizer* optimizer,
                            const CheckpointMeta& meta) {
  fs::create_directories(dir);
  const std::string stem = fmt::format("{}/step-{:08d}", dir, meta.step);
  const std::string archive_path = stem + ".pt", temp = stem + ".pt.tmp";

  torch::serialize::OutputArchive root;
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  root.write("model", model_archive);
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer->save(optimizer_archive);
    root.write("optimizer", optimizer_archive);
  }
  root.write("format_version", c10::IValue(meta.format_version));
  root.write("step", c10::IValue(meta.step));
  root.write("tokens", c10::IValue(meta.tokens));
  root.write("flops", c10::IValue(meta.flops));
  root.write("train_loss", c10::IValue(meta.train_loss));
  root.write("val_loss", c10::IValue(meta.val_loss));
  root.write("best_val_loss", c10::IValue(meta.best_val_loss));
  root.write("wall_seconds", c10::IValue(meta.wall_seconds));
  root.write("sampler_state", c10::IValue(meta.sampler_state));
  root.write("config_toml", c10::IValue(meta.config_toml));
  root.write("inherited_flops", c10::IValue(meta.inherited_flops));
  root.write("parent_run", c10::IValue(meta.parent_run));
  root.write("parent_checkpoint", c10::IValue(meta.parent_checkpoint));
  root.write("growth_method", c10::IValue(meta.growth_method));
  root.write("growth_options", c10::IValue(meta.growth_options));
  root.write("torch_rng", torch_rng_state());
  root.save_to(temp);
  path_fsync(temp);
  fs::rename(temp, archive_path);

  CheckpointInfo info;
  info.path = archive_path;
  info.step = meta.step;
  info.val_loss = meta.val_loss;
  info.size = fs::file_size(archive_path);
  info.crc32 = file_crc32(archive_path);
  toml::table manifest{{"format_version", meta.format_version},
                       {"archive", fs::path(archive_path).filename().string()},
                       {"size", static_cast<std::int64_t>(info.size)},
                       {"crc32", static_cast<std::int64_t>(info.crc32)},
                       {"step", meta.step},
                       {"tokens", meta.tokens},
                       {"flops", meta.flops},
                       {"train_loss", meta.train_loss}};
  if (std::isfinite(meta.val_loss)) manifest.insert("val_loss", meta.val_loss);
  if (!meta.growth_method.empty()) manifest.insert("growth_method", meta.growth_method);
  const std::string manifest_path = manifest_of(archive_path), manifest_temp = manifest_path + ".tmp";
  {
    std::ofstream out(manifest_temp);
    out << "# tfw checkpoint manifest\n" << manifest << "\n";
    if (!out) throw Error(fmt::format("cannot write checkpoint manifest '{}' (disk full?)", manifest_temp));
  }
  path_fsync(manifest_temp);
  fs::rename(manifest_temp, manifest_path);
  path_fsync(dir);
  return info;
}

std::vector<CheckpointInfo> checkpoint_list(const std::string& dir) {
  std::vector<CheckpointInfo> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& path = entry.path();
    if (path.extension() != ".toml" || path.filename().string().rfind("step-", 0) != 0) continue;
    try {
      toml::table manifest = toml::parse_file(path.string());
      CheckpointInfo info;
      info.path = (path.parent_path() / manifest["archive"].value_or(std::string())).string();
      info.step = manifest["step"].value_or(std::int64_t{0});
      info.val_loss = manifest["val_loss"].value_or(std::numeric_limits<double>::quiet_NaN());
      info.size = static_cast<std::uint64_t>(manifest["size"].value_or(std::int64_t{0}));
      info.crc32 = static_cast<std::uint32_t>(manifest["crc32"].value_or(std::int64_t{0}));
      if (fs::exists(info.path)) found.push_back(info);
    } catch (const toml::parse_error&) {
      // A torn manifest cannot happen (it is renamed into place); skip anything unreadable.
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return found;
}

void checkpoint_verify(const std::string& path) {
  if (!fs::exists(path)) throw UsageError(fmt::format("checkpoint '{}' not found", path));
  toml::table manifest = manifest_read(path);
  const std::int64_t version = manifest["format_version"].value_or(std::int64_t{0});
  if (version != kCheckpointFormatVersion) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' has format version {}, this tfw reads version {}", path,
                                           version, kCheckpointFormatVersion),
                               "use the tfw version that wrote it"));
  }
  const auto size = static_cast<std::uint64_t>(manifest["size"].value_or(std::int64_t{-1}));
  const auto actual_size = static_cast<std::uint64_t>(fs::file_size(path));
  if (actual_size != size) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' is truncated or altered: {} bytes, its manifest says {}",
                                           path, actual_size, size),
                               "use an earlier checkpoint of the run (tfw train --resume picks the last valid one)"));
  }
  const auto crc = static_cast<std::uint32_t>(manifest["crc32"].value_or(std::int64_t{0}));
  if (file_crc32(path) != crc) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' is corrupt: its CRC-32 does not match its manifest", path),
                               "use an earlier checkpoint of the run (tfw train --resume picks the last valid one)"));
  }
}

namespace {

CheckpointMeta meta_from(torch::serialize::InputArchive& root) {
  auto read = [&](const char* key) {
    c10::IValue value;
    read_into(root, key, value);
    return value;
  };
  CheckpointMeta meta;
  meta.format_version = read("format_version").toInt();
  meta.step = read("step").toInt();
  meta.tokens = read("tokens").toInt();
  meta.flops = read("flops").toDouble();
  meta.train_loss = read("train_loss").toDouble();
  meta.val_loss = read("val_loss").toDouble();
  meta.best_val_loss = read("best_val_loss").toDouble();
  meta.wall_seconds = read("wall_seconds").toDouble();
  meta.sampler_state = read("sampler_state").toStringRef();
  meta.config_toml = read("config_toml").toStringRef();
  meta.inherited_flops = read("inherited_flops").toDouble();
  meta.parent_run = read("parent_run").toInt();
  meta.parent_checkpoint = read("parent_checkpoint").toStringRef();
  meta.growth_method = read("growth_method").toStringRef();
  meta.growth_options = read("growth_options").toStringRef();
  return meta;
}

}  // namespace

CheckpointMeta checkpoint_read_meta(const std::string& path) {
  checkpoint_verify(path);
  torch::serialize::InputArchive root;
  root.load_from(path);
  return meta_from(root);
}

CheckpointMeta checkpoint_load(const std::string& path, LanguageModel& model, torch::optim::Optimizer* optimizer) {
  checkpoint_verify(path);
  torch::serialize::InputArchive root;
  root.load_from(path);
  CheckpointMeta meta = meta_from(root);
  try {
    torch::serialize::InputArchive model_archive;
    root.read("model", model_archive);
    model.load(model_archive);
    if (optimizer != nullptr) {
      torch::serialize::InputArchive optimizer_archive;
      root.read("optimizer", optimizer_archive);
      optimizer->load(optimizer_archive);
    }
    torch::Tensor rng;
    root.read("torch_rng", rng);
    torch_rng_state_set(rng);
  } catch (const c10::Error& e) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' does not fit this model: {}", path,
                                           e.what_without_backtrace()),
                               "build the model from the checkpoint's own config (tfw train --resume does)"));
  }
  return meta;
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
    fs::remove(manifest_of(all[i].path));  // manifest first: the archive is then ignored
    fs::remove(all[i].path);
    removed.push_back(all[i].path);
  }
  return removed;
}

}  // namespace tfw
