// Checkpoint files. See checkpoint.h.
#include "engine/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/files.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

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

CheckpointInfo checkpoint_save(const std::string& dir, Model& model, torch::optim::Optimizer* optimizer,
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
  root.write("examples", c10::IValue(meta.examples));
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
  // Serialised in memory first, then written by us: LibTorch's file writer throws from its
  // destructor when the disk fills (std::terminate, a stray .pt.tmp and a run left
  // "running"); ours reports the full disk as an Error and removes the partial file.
  std::string bytes;
  root.save_to([&bytes](const void* data, std::size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  file_write_durably(temp, bytes.data(), bytes.size());
  bytes = std::string();
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
                       {"examples", meta.examples},
                       {"flops", meta.flops},
                       {"train_loss", meta.train_loss}};
  if (std::isfinite(meta.val_loss)) manifest.insert("val_loss", meta.val_loss);
  if (!meta.growth_method.empty()) manifest.insert("growth_method", meta.growth_method);
  const std::string manifest_path = manifest_of(archive_path), manifest_temp = manifest_path + ".tmp";
  {
    std::ostringstream text;
    text << "# tfw checkpoint manifest\n" << manifest << "\n";
    const std::string manifest_text = text.str();
    try {
      file_write_durably(manifest_temp, manifest_text.data(), manifest_text.size());
    } catch (const Error&) {
      fs::remove(archive_path);  // an archive without its manifest is ignored; do not leave it taking space
      throw;
    }
  }
  fs::rename(manifest_temp, manifest_path);
  path_fsync(dir);
  return info;
}

namespace {

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
    info.path = fs::path(path).replace_extension(".pt").string();
    info.step = step_of_name(path);
    info.val_loss = std::numeric_limits<double>::quiet_NaN();
    try {
      toml::table manifest = toml::parse_file(path.string());
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

void checkpoint_verify(const std::string& path) {
  if (!fs::exists(path)) throw UsageError(fmt::format("checkpoint '{}' not found", path));
  toml::table manifest = manifest_read(path);
  const std::int64_t version = manifest["format_version"].value_or(std::int64_t{0});
  if (version != kCheckpointFormatVersion) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' has format version {}, this tfw reads version {}", path,
                                           version, kCheckpointFormatVersion),
                               "use the tfw version that wrote it"));
  }
  const std::string archive = manifest["archive"].value_or(std::string());
  const std::int64_t step = manifest["step"].value_or(std::int64_t{-1});
  const std::int64_t named = step_of_name(path);
  if (archive != fs::path(path).filename().string() || (named >= 0 && step != named)) {
    throw UsageError(fmt::format("checkpoint '{}' has a manifest that does not match it (archive '{}', step {})",
                                 path, archive, step));
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

CheckpointInfo checkpoint_latest_valid(const std::string& dir, std::vector<std::string>* skipped,
                                       CheckpointMeta* meta) {
  std::vector<CheckpointInfo> all = checkpoint_list(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      const CheckpointMeta read = checkpoint_read_meta(it->path);  // verifies, and the archive itself must load
      if (meta != nullptr) *meta = read;
      return *it;
    } catch (const UsageError& e) {
      if (skipped != nullptr) skipped->push_back(e.what());
    }
  }
  throw UsageError(with_hint(fmt::format("'{}' holds no valid checkpoint{}", dir,
                                         all.empty() ? "" : fmt::format(" ({} damaged)", all.size())),
                             "the run has nothing to resume from: start it again (its record is replaced)"));
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
  c10::IValue examples;  // absent before examples were counted: -1, for the trainer to derive
  meta.examples = root.try_read("examples", examples) ? examples.toInt() : -1;
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

namespace {

// Opens a verified archive. A file whose checksum matches but that is not a LibTorch archive
// of ours (random bytes with a forged manifest) is a clear error, not a torch stack trace.
// Tensors land on `device` (the model's), whatever device wrote them.
void archive_open(torch::serialize::InputArchive& root, const std::string& path, CheckpointMeta* meta,
                  torch::Device device = torch::kCPU) {
  try {
    root.load_from(path, device);
    if (meta != nullptr) *meta = meta_from(root);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    throw UsageError(with_hint(fmt::format("checkpoint '{}' is not a readable tfw checkpoint archive: {}", path,
                                           what.substr(0, what.find('\n'))),
                               "use another checkpoint of the run; this file is damaged or not a checkpoint"));
  }
}

}  // namespace

CheckpointMeta checkpoint_read_meta(const std::string& path) {
  checkpoint_verify(path);
  torch::serialize::InputArchive root;
  CheckpointMeta meta;
  archive_open(root, path, &meta);
  return meta;
}

CheckpointMeta checkpoint_load(const std::string& path, Model& model, torch::optim::Optimizer* optimizer) {
  checkpoint_verify(path);
  torch::serialize::InputArchive root;
  CheckpointMeta meta;
  archive_open(root, path, &meta, module_device(model));
  // Module::load replaces a buffer with the stored tensor whatever its dtype (set_): a float32
  // tau read into a float64 slot would pass silently, so dtypes are compared after.
  std::map<std::string, torch::ScalarType> dtypes;
  for (const auto& item : model.named_buffers()) dtypes[item.key()] = item.value().scalar_type();
  for (const auto& item : model.named_parameters()) dtypes[item.key()] = item.value().scalar_type();
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
  auto check = [&](const std::string& name, const torch::Tensor& t) {
    auto it = dtypes.find(name);
    if (it != dtypes.end() && it->second != t.scalar_type()) {
      throw UsageError(with_hint(fmt::format("checkpoint '{}' does not fit this model: {} is {} in the file, the "
                                             "model holds it as {}",
                                             path, name, c10::toString(t.scalar_type()), c10::toString(it->second)),
                                 "the checkpoint was written by another version of the model family"));
    }
  };
  for (const auto& item : model.named_buffers()) check(item.key(), item.value());
  for (const auto& item : model.named_parameters()) check(item.key(), item.value());
  model.set_training_step(meta.step);
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
