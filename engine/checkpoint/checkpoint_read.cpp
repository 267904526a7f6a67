// A checkpoint's metadata, read without LibTorch (libtfw_core): the entries checkpoint_save
// writes, their bounded reading back, and the run config a checkpoint holds. The store's
// plumbing, the runner and the service read checkpoints through these alone; loading the
// tensors is engine/checkpoint/checkpoint.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/checkpoint/mapped_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/config/run_config.h"
#include "engine/core/error.h"

namespace tfw {

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError(fmt::format("checkpoint '{}' cannot be opened: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UsageError(fmt::format("checkpoint '{}' is not a regular file", path));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      throw Error(fmt::format("checkpoint '{}' cannot be mapped: {}", path, std::strerror(errno)));
    }
    data_ = static_cast<const char*>(mapped);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

namespace {

std::string number_text(double value) { return fmt::format("{}", value); }  // shortest round-trip form

}  // namespace

std::map<std::string, std::string> checkpoint_metadata(const CheckpointMeta& meta) {
  return {{"format", "tfw-checkpoint"},
          {"format_version", std::to_string(kCheckpointFormatVersion)},
          {"step", std::to_string(meta.step)},
          {"tokens", std::to_string(meta.tokens)},
          {"examples", std::to_string(meta.examples)},
          {"flops", number_text(meta.flops)},
          {"train_loss", number_text(meta.train_loss)},
          {"val_loss", number_text(meta.val_loss)},
          {"best_val_loss", number_text(meta.best_val_loss)},
          {"wall_seconds", number_text(meta.wall_seconds)},
          {"sampler_state", meta.sampler_state},
          {"config_toml", meta.config_toml},
          {"inherited_flops", number_text(meta.inherited_flops)},
          {"parent_run", std::to_string(meta.parent_run)},
          {"parent_checkpoint", meta.parent_checkpoint},
          {"growth_method", meta.growth_method},
          {"growth_options", meta.growth_options},
          {"threads", std::to_string(meta.threads)},
          {"cpu_capability", meta.cpu_capability},
          {"micro_batch", std::to_string(meta.micro_batch)}};
}

namespace {

const std::string& metadata_text(const std::map<std::string, std::string>& metadata, const std::string& path,
                                 const char* key) {
  auto it = metadata.find(key);
  if (it == metadata.end()) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' lacks the metadata entry '{}'", path, key),
                               "use another checkpoint of the run; this file is damaged or not a tfw checkpoint"));
  }
  return it->second;
}

std::int64_t metadata_integer(const std::map<std::string, std::string>& metadata, const std::string& path,
                              const char* key) {
  const std::string& text = metadata_text(metadata, path, key);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError(
        fmt::format("checkpoint '{}': metadata '{}' is '{}', not an integer", path, key, text.substr(0, 40)));
  }
  return value;
}

double metadata_real(const std::map<std::string, std::string>& metadata, const std::string& path, const char* key) {
  const std::string& text = metadata_text(metadata, path, key);
  char* end = nullptr;
  const double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    throw UsageError(
        fmt::format("checkpoint '{}': metadata '{}' is '{}', not a number", path, key, text.substr(0, 40)));
  }
  return value;
}

}  // namespace

CheckpointMeta checkpoint_meta_from(const std::map<std::string, std::string>& metadata, const std::string& path) {
  if (metadata_text(metadata, path, "format") != "tfw-checkpoint") {
    throw UsageError(
        with_hint(fmt::format("'{}' is a safetensors file but not a tfw checkpoint", path),
                  "tfw import reads other models' weights; a checkpoint comes from tfw train or tfw grow"));
  }
  CheckpointMeta meta;
  meta.format_version = metadata_integer(metadata, path, "format_version");
  if (meta.format_version != kCheckpointFormatVersion) {
    throw UsageError(fmt::format("checkpoint '{}' says format version {} inside, this tfw reads version {}", path,
                                 meta.format_version, kCheckpointFormatVersion));
  }
  meta.step = metadata_integer(metadata, path, "step");
  meta.tokens = metadata_integer(metadata, path, "tokens");
  meta.examples = metadata_integer(metadata, path, "examples");
  meta.flops = metadata_real(metadata, path, "flops");
  meta.train_loss = metadata_real(metadata, path, "train_loss");
  meta.val_loss = metadata_real(metadata, path, "val_loss");
  meta.best_val_loss = metadata_real(metadata, path, "best_val_loss");
  meta.wall_seconds = metadata_real(metadata, path, "wall_seconds");
  meta.sampler_state = metadata_text(metadata, path, "sampler_state");
  meta.config_toml = metadata_text(metadata, path, "config_toml");
  meta.inherited_flops = metadata_real(metadata, path, "inherited_flops");
  meta.parent_run = metadata_integer(metadata, path, "parent_run");
  meta.parent_checkpoint = metadata_text(metadata, path, "parent_checkpoint");
  meta.growth_method = metadata_text(metadata, path, "growth_method");
  meta.growth_options = metadata_text(metadata, path, "growth_options");
  meta.threads = metadata.count("threads") ? metadata_integer(metadata, path, "threads") : 0;
  meta.cpu_capability = metadata.count("cpu_capability") ? metadata_text(metadata, path, "cpu_capability") : "";
  meta.micro_batch = metadata.count("micro_batch") ? metadata_integer(metadata, path, "micro_batch") : 0;
  // A name ATen gives ("AVX512"), at most 16 capitals, digits or underscores: it is compared,
  // never run, but a forged one is refused here rather than carried into the run's events.
  if (meta.cpu_capability.size() > 16 ||
      meta.cpu_capability.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}': metadata 'cpu_capability' is not a name of ATen's CPU "
                                           "kernels (such as AVX2)",
                                           path),
                               "use another checkpoint of the run; this file is damaged or was not written by tfw"));
  }
  // Counters are never negative and FLOPs are finite: a step of -5 rewrote a run's stored steps,
  // and an inherited_flops of inf was stored, then refused in the run's bundle.
  const std::pair<const char*, double> counts[] = {{"step", static_cast<double>(meta.step)},
                                                   {"tokens", static_cast<double>(meta.tokens)},
                                                   {"flops", meta.flops},
                                                   {"inherited_flops", meta.inherited_flops},
                                                   {"threads", static_cast<double>(meta.threads)},
                                                   {"micro_batch", static_cast<double>(meta.micro_batch)}};
  for (const auto& [key, value] : counts) {
    if (!std::isfinite(value) || value < 0) {
      throw UsageError(
          with_hint(fmt::format("checkpoint '{}': metadata '{}' is {}, not a count >= 0", path, key, value),
                    "use another checkpoint of the run; this file is damaged or was not written by tfw"));
    }
  }
  return meta;
}

CheckpointMeta checkpoint_read_meta(const std::string& path) {
  checkpoint_verify(path);
  const MappedFile file(path);
  const SafetensorsFile parsed = safetensors_parse(file.data(), file.size(), fmt::format("checkpoint '{}'", path));
  return checkpoint_meta_from(parsed.metadata, path);
}

RunConfig checkpoint_run_config(const Registry& registry, const CheckpointMeta& meta, const std::string& where,
                                const std::string& device) {
  toml::table table;
  try {
    table = toml::parse(std::string_view(meta.config_toml), where);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("checkpoint '{}': its stored config is not valid TOML: {}", where, e.description()));
  }
  if (!device.empty()) {
    toml::table* train = table["train"].as_table();
    if (train == nullptr) train = table.insert_or_assign("train", toml::table{}).first->second.as_table();
    train->insert_or_assign("device", device);
    if (device == "cpu") train->erase("tf32");  // a CUDA setting
  }
  RunConfig config = run_config_parse(registry, table, where);
  // A forged config (d = 1,000,000) built a 2.8 GB model before its tensors were compared: a
  // model with more parameters than the file stores model elements for cannot be the file's.
  std::error_code ec;
  const std::string suffix = ".safetensors";
  if (where.size() > suffix.size() && where.compare(where.size() - suffix.size(), suffix.size(), suffix) == 0 &&
      std::filesystem::is_regular_file(where, ec)) {
    const MappedFile file(where);
    const SafetensorsFile parsed = safetensors_parse(file.data(), file.size(), fmt::format("checkpoint '{}'", where));
    double stored = 0;
    for (const SafetensorsEntry& entry : parsed.tensors) {
      if (entry.name.rfind("optimizer.", 0) == 0) continue;
      double elements = 1;
      for (const std::int64_t size : entry.shape) elements *= static_cast<double>(size);
      stored += elements;
    }
    const double wanted = static_cast<double>(config.model.spec->parameter_count());
    if (wanted > stored) {
      throw UsageError(
          with_hint(fmt::format("checkpoint '{}': its config describes a model of {:.0f} parameters, but the "
                                "file stores {:.0f} model values: the config does not fit its weights",
                                where, wanted, stored),
                    "the file is damaged or forged; use another checkpoint of the run"));
    }
  }
  return config;
}

}  // namespace tfw
