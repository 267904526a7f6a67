// Checkpoint files. See checkpoint.h.
#include "engine/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/machine/device.h"
#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/core/files.h"
#include "engine/config/run_config.h"
#include "engine/checkpoint/mapped_file.h"
#include "engine/checkpoint/safetensors.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

// The safetensors dtype of a torch dtype, and back.
struct DtypePair {
  torch::ScalarType torch;
  const char* name;
};
constexpr DtypePair kDtypePairs[] = {{torch::kDouble, "F64"},    {torch::kFloat, "F32"}, {torch::kHalf, "F16"},
                                     {torch::kBFloat16, "BF16"}, {torch::kLong, "I64"},  {torch::kInt, "I32"},
                                     {torch::kShort, "I16"},     {torch::kChar, "I8"},   {torch::kByte, "U8"},
                                     {torch::kBool, "BOOL"}};

const char* dtype_name(torch::ScalarType type) {
  for (const DtypePair& pair : kDtypePairs) {
    if (pair.torch == type) return pair.name;
  }
  throw Error(fmt::format("checkpoint: cannot store a tensor of dtype {}", c10::toString(type)));
}

torch::ScalarType dtype_of(const std::string& name) {
  for (const DtypePair& pair : kDtypePairs) {
    if (name == pair.name) return pair.torch;
  }
  throw Error(fmt::format("checkpoint: unknown dtype {}", name));  // safetensors_parse admits only the above
}

torch::Tensor torch_rng_state() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

// Tensors to write: each owns a CPU, contiguous copy until the bytes are encoded.
class TensorsOut {
 public:
  void add(const std::string& name, const torch::Tensor& tensor) {
    torch::Tensor cpu = tensor.detach().to(torch::kCPU).contiguous();
    SafetensorsEntry entry;
    entry.name = name;
    entry.dtype = dtype_name(cpu.scalar_type());
    entry.shape = cpu.sizes().vec();
    entry.data = static_cast<const char*>(cpu.data_ptr());
    keep_.push_back(cpu);
    entries_.push_back(std::move(entry));
  }
  std::string encode(const std::map<std::string, std::string>& metadata) {
    return safetensors_encode(entries_, metadata);
  }

 private:
  std::vector<torch::Tensor> keep_;
  std::vector<SafetensorsEntry> entries_;
};

// The optimiser's parameters, named as the model names them.
std::map<const c10::TensorImpl*, std::string> parameter_names(Model& model) {
  std::map<const c10::TensorImpl*, std::string> names;
  for (const auto& item : model.named_parameters()) names.emplace(item.value().unsafeGetTensorImpl(), item.key());
  return names;
}

// AdamW's state and groups: each parameter's moments and step as tensors
// (optimizer.state.NAME.{exp_avg,exp_avg_sq,max_exp_avg_sq,step}), and the groups (their
// parameters by name, and options) as JSON in the metadata entry "optimizer".
std::string optimizer_write(Model& model, torch::optim::Optimizer& optimizer, TensorsOut& out) {
  const auto names = parameter_names(model);
  nlohmann::json groups = nlohmann::json::array();
  for (auto& group : optimizer.param_groups()) {
    auto* options = dynamic_cast<torch::optim::AdamWOptions*>(&group.options());
    if (options == nullptr) throw Error("checkpoint: only AdamW's optimiser state is stored");
    nlohmann::json params = nlohmann::json::array();
    for (const torch::Tensor& param : group.params()) {
      auto name = names.find(param.unsafeGetTensorImpl());
      if (name == names.end()) throw Error("checkpoint: the optimiser holds a parameter the model does not name");
      params.push_back(name->second);
      auto found = optimizer.state().find(param.unsafeGetTensorImpl());
      if (found == optimizer.state().end()) continue;
      auto* state = dynamic_cast<torch::optim::AdamWParamState*>(found->second.get());
      if (state == nullptr) throw Error("checkpoint: only AdamW's optimiser state is stored");
      const std::string prefix = "optimizer.state." + name->second + ".";
      out.add(prefix + "step", torch::tensor(state->step(), torch::kLong));
      out.add(prefix + "exp_avg", state->exp_avg());
      out.add(prefix + "exp_avg_sq", state->exp_avg_sq());
      if (state->max_exp_avg_sq().defined()) out.add(prefix + "max_exp_avg_sq", state->max_exp_avg_sq());
    }
    groups.push_back({{"params", params},
                      {"lr", options->lr()},
                      {"beta1", std::get<0>(options->betas())},
                      {"beta2", std::get<1>(options->betas())},
                      {"eps", options->eps()},
                      {"weight_decay", options->weight_decay()},
                      {"amsgrad", options->amsgrad()}});
  }
  return nlohmann::json({{"kind", "adamw"}, {"groups", groups}}).dump();
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> checkpoint_model_tensors(Model& model) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : model.named_parameters()) tensors.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers()) tensors.emplace_back(item.key(), item.value());
  return tensors;
}

CheckpointInfo checkpoint_save(const std::string& dir, Model& model, torch::optim::Optimizer* optimizer,
                               const CheckpointMeta& meta) {
  fs::create_directories(dir);
  const std::string stem = fmt::format("{}/step-{:08d}", dir, meta.step);
  const std::string archive_path = stem + kCheckpointExtension, temp = archive_path + ".tmp";

  TensorsOut out;
  for (const auto& [name, tensor] : checkpoint_model_tensors(model)) out.add("model." + name, tensor);
  std::map<std::string, std::string> metadata = checkpoint_metadata(meta);
  if (optimizer != nullptr) metadata["optimizer"] = optimizer_write(model, *optimizer, out);
  out.add("rng.torch_cpu", torch_rng_state());
  // Encoded in memory, then written by us: a full disk is an Error and leaves no partial file.
  std::string bytes = out.encode(metadata);
  file_write_durably(temp, bytes.data(), bytes.size());
  bytes = std::string();
  fs::rename(temp, archive_path);

  CheckpointInfo info;
  info.path = archive_path;
  info.step = meta.step;
  info.val_loss = meta.val_loss;
  info.size = fs::file_size(archive_path);
  info.crc32 = file_crc32(archive_path);
  toml::table manifest{{"format_version", kCheckpointFormatVersion},
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
  const std::string manifest_path = checkpoint_manifest_path(archive_path), manifest_temp = manifest_path + ".tmp";
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

// A verified checkpoint, mapped and parsed.
struct OpenCheckpoint {
  std::unique_ptr<MappedFile> file;
  SafetensorsFile parsed;
  std::map<std::string, const SafetensorsEntry*> by_name;
  CheckpointMeta meta;
};

OpenCheckpoint checkpoint_open(const std::string& path) {
  checkpoint_verify(path);
  OpenCheckpoint open;
  open.file = std::make_unique<MappedFile>(path);
  open.parsed = safetensors_parse(open.file->data(), open.file->size(), fmt::format("checkpoint '{}'", path));
  for (const SafetensorsEntry& entry : open.parsed.tensors) open.by_name[entry.name] = &entry;
  open.meta = checkpoint_meta_from(open.parsed.metadata, path);
  return open;
}

// A CPU tensor holding a copy of the entry's bytes (the mapping may be unaligned for its type).
torch::Tensor tensor_of(const SafetensorsEntry& entry) {
  torch::Tensor tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(dtype_of(entry.dtype)));
  if (entry.end > entry.begin) std::memcpy(tensor.data_ptr(), entry.data, entry.end - entry.begin);
  return tensor;
}

[[noreturn]] void does_not_fit(const std::string& path, const std::string& why,
                               const std::string& hint =
                                   "build the model from the checkpoint's own config (tfw "
                                   "train --resume does)") {
  throw TensorMismatch(with_hint(fmt::format("checkpoint '{}' does not fit this model: {}", path, why), hint), why);
}

// Copies the stored tensor into `target` (same name, dtype and shape, else UsageError).
void load_into(const OpenCheckpoint& open, const std::string& path, const std::string& name, torch::Tensor target) {
  auto it = open.by_name.find(name);
  if (it == open.by_name.end()) does_not_fit(path, fmt::format("it holds no tensor '{}'", name));
  const SafetensorsEntry& entry = *it->second;
  if (dtype_of(entry.dtype) != target.scalar_type()) {
    does_not_fit(path,
                 fmt::format("{} is {} in the file, the model holds it as {}", name, entry.dtype,
                             dtype_name(target.scalar_type())),
                 "the checkpoint was written by another version of the model family");
  }
  if (entry.shape != target.sizes().vec()) {
    does_not_fit(path, fmt::format("{} has shape {} in the file, {} in the model", name,
                                   c10::str(c10::IntArrayRef(entry.shape)), c10::str(target.sizes())));
  }
  torch::NoGradGuard no_grad;
  target.copy_(tensor_of(entry));
}

void optimizer_read(const OpenCheckpoint& open, const std::string& path, Model& model,
                    torch::optim::Optimizer& optimizer) {
  auto text = open.parsed.metadata.find("optimizer");
  if (text == open.parsed.metadata.end()) {
    throw UsageError(with_hint(fmt::format("checkpoint '{}' holds no optimiser state", path),
                               "it was written by tfw grow or tfw import: start a run from it with --init-from"));
  }
  // Two counts per parameter tensor and a few per group: bounded by the metadata's own limits.
  nlohmann::json state;
  const std::string why = json_parse_bounded(text->second, {5, std::size_t{1} << 20, std::size_t{1} << 22}, state);
  if (!why.empty()) throw UsageError(fmt::format("checkpoint '{}': its optimiser entry {}", path, why));
  const auto names = parameter_names(model);
  auto& groups = optimizer.param_groups();
  try {
    const nlohmann::json& stored = state.at("groups");
    if (state.at("kind") != "adamw" || !stored.is_array() || stored.size() != groups.size()) {
      does_not_fit(path, fmt::format("its optimiser has {} parameter groups, this run's {}",
                                     stored.is_array() ? stored.size() : 0, groups.size()));
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const nlohmann::json& group = stored[g];
      auto& params = groups[g].params();
      const nlohmann::json& stored_params = group.at("params");
      if (!stored_params.is_array() || stored_params.size() != params.size()) {
        does_not_fit(path, fmt::format("optimiser group {} holds {} parameters in the file, {} in this run", g,
                                       stored_params.is_array() ? stored_params.size() : 0, params.size()));
      }
      auto& options = static_cast<torch::optim::AdamWOptions&>(groups[g].options());
      options.lr(group.at("lr").get<double>())
          .betas({group.at("beta1").get<double>(), group.at("beta2").get<double>()})
          .eps(group.at("eps").get<double>())
          .weight_decay(group.at("weight_decay").get<double>())
          .amsgrad(group.at("amsgrad").get<bool>());
      for (std::size_t i = 0; i < params.size(); ++i) {
        const std::string name = names.at(params[i].unsafeGetTensorImpl());
        if (stored_params[i] != name) {
          does_not_fit(path,
                       fmt::format("optimiser group {} names '{}' where this run has '{}'", g,
                                   stored_params[i].is_string() ? stored_params[i].get<std::string>() : "?", name));
        }
        const std::string prefix = "optimizer.state." + name + ".";
        auto step = open.by_name.find(prefix + "step");
        if (step == open.by_name.end()) {
          optimizer.state().erase(params[i].unsafeGetTensorImpl());  // no step taken for it yet
          continue;
        }
        const torch::Tensor step_tensor = tensor_of(*step->second);
        if (step_tensor.scalar_type() != torch::kLong || step_tensor.numel() != 1) {
          does_not_fit(path, fmt::format("{}step is not one integer", prefix));
        }
        auto moment = [&](const char* key, bool required) {
          torch::Tensor value;
          auto it = open.by_name.find(prefix + key);
          if (it == open.by_name.end()) {
            if (required) does_not_fit(path, fmt::format("it lacks {}{}", prefix, key));
            return value;
          }
          value = torch::empty_like(params[i]);
          load_into(open, path, prefix + key, value);
          return value;
        };
        auto adamw = std::make_unique<torch::optim::AdamWParamState>();
        adamw->step(step_tensor.item<std::int64_t>());
        adamw->exp_avg(moment("exp_avg", true));
        adamw->exp_avg_sq(moment("exp_avg_sq", true));
        adamw->max_exp_avg_sq(moment("max_exp_avg_sq", false));
        optimizer.state()[params[i].unsafeGetTensorImpl()] = std::move(adamw);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("checkpoint '{}': its optimiser entry is not valid: {}", path, e.what()));
  }
}

}  // namespace

CheckpointMeta checkpoint_load(const std::string& path, Model& model, torch::optim::Optimizer* optimizer) {
  const OpenCheckpoint open = checkpoint_open(path);
  std::set<std::string> expected;
  for (const auto& [name, tensor] : checkpoint_model_tensors(model)) {
    load_into(open, path, "model." + name, tensor);
    expected.insert("model." + name);
  }
  for (const SafetensorsEntry& entry : open.parsed.tensors) {
    if (entry.name.rfind("model.", 0) == 0 && expected.count(entry.name) == 0) {
      does_not_fit(path, fmt::format("it holds '{}', which this model does not have", entry.name));
    }
  }
  if (optimizer != nullptr) optimizer_read(open, path, model, *optimizer);
  auto rng = open.by_name.find("rng.torch_cpu");
  if (rng == open.by_name.end()) throw UsageError(fmt::format("checkpoint '{}' lacks rng.torch_cpu", path));
  torch::Tensor state = tensor_of(*rng->second);
  try {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  } catch (const c10::Error& e) {
    throw UsageError(
        fmt::format("checkpoint '{}': its random generator state is not valid ({})", path, e.what_without_backtrace()));
  }
  model.set_training_step(open.meta.step);
  return open.meta;
}

void model_weights_save(const std::string& path, Model& model, const std::map<std::string, std::string>& metadata) {
  TensorsOut out;
  for (const auto& [name, tensor] : checkpoint_model_tensors(model)) out.add(name, tensor);
  std::string bytes = out.encode(metadata);
  const std::string temp = path + ".tmp";
  file_write_durably(temp, bytes.data(), bytes.size());
  fs::rename(temp, path);
}

std::map<std::string, std::string> model_weights_load(const std::string& path, Model& model) {
  OpenCheckpoint open;
  open.file = std::make_unique<MappedFile>(path);
  open.parsed = safetensors_parse(open.file->data(), open.file->size(), fmt::format("model weights '{}'", path));
  for (const SafetensorsEntry& entry : open.parsed.tensors) open.by_name[entry.name] = &entry;
  std::set<std::string> expected;
  for (const auto& [name, tensor] : checkpoint_model_tensors(model)) {
    load_into(open, path, name, tensor);
    expected.insert(name);
  }
  for (const SafetensorsEntry& entry : open.parsed.tensors) {
    if (expected.count(entry.name) == 0)
      does_not_fit(path, fmt::format("it holds '{}', which this model does not have", entry.name));
  }
  return open.parsed.metadata;
}

const char* checkpoint_dtype_name(torch::ScalarType type) { return dtype_name(type); }

}  // namespace tfw
