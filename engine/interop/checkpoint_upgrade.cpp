// Legacy checkpoints into today's format. See checkpoint_upgrade.h.
#include "engine/interop/checkpoint_upgrade.h"

#include <filesystem>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/interop/torch_pickle.h"
#include "engine/train/optim.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

bool is_legacy(const fs::path& archive) {
  if (archive.extension() != ".pt") return false;
  const fs::path manifest = fs::path(archive).replace_extension(".toml");
  std::error_code ec;
  if (!fs::is_regular_file(manifest, ec) || !fs::is_regular_file(archive, ec)) return false;
  try {
    const toml::table table = toml::parse_file(manifest.string());
    return table["format_version"].value_or(std::int64_t{0}) == kCheckpointLegacyVersion;
  } catch (const toml::parse_error&) {
    return false;
  }
}

// The values of a legacy archive, by dotted name; every lookup checks the kind.
class Leaves {
 public:
  Leaves(std::string path, std::map<std::string, ArchiveLeaf> leaves)
      : path_(std::move(path)), leaves_(std::move(leaves)) {}

  bool has(const std::string& key) const { return leaves_.count(key) != 0; }
  const ArchiveLeaf& get(const std::string& key, ArchiveLeaf::Kind kind) const {
    auto it = leaves_.find(key);
    if (it == leaves_.end()) {
      throw UsageError(with_hint(fmt::format("{}: the legacy checkpoint lacks '{}'", path_, key),
                                 "it is damaged or not a tfw checkpoint; it was left as it is"));
    }
    if (it->second.kind != kind) throw UsageError(fmt::format("{}: '{}' has an unexpected type", path_, key));
    return it->second;
  }
  std::int64_t integer(const std::string& key) const { return get(key, ArchiveLeaf::Kind::integer).integer; }
  double real(const std::string& key) const { return get(key, ArchiveLeaf::Kind::real).real; }
  const std::string& text(const std::string& key) const { return get(key, ArchiveLeaf::Kind::string).text; }
  const torch::Tensor& tensor(const std::string& key) const { return get(key, ArchiveLeaf::Kind::tensor).tensor; }
  const std::map<std::string, ArchiveLeaf>& all() const { return leaves_; }

 private:
  std::string path_;
  std::map<std::string, ArchiveLeaf> leaves_;
};

CheckpointMeta legacy_meta(const Leaves& leaves) {
  CheckpointMeta meta;
  meta.format_version = kCheckpointFormatVersion;
  meta.step = leaves.integer("step");
  meta.tokens = leaves.integer("tokens");
  meta.examples = leaves.has("examples") ? leaves.integer("examples") : -1;
  meta.flops = leaves.real("flops");
  meta.train_loss = leaves.real("train_loss");
  meta.val_loss = leaves.real("val_loss");
  meta.best_val_loss = leaves.real("best_val_loss");
  meta.wall_seconds = leaves.real("wall_seconds");
  meta.sampler_state = leaves.text("sampler_state");
  meta.config_toml = leaves.text("config_toml");
  meta.inherited_flops = leaves.real("inherited_flops");
  meta.parent_run = leaves.integer("parent_run");
  meta.parent_checkpoint = leaves.text("parent_checkpoint");
  meta.growth_method = leaves.text("growth_method");
  meta.growth_options = leaves.text("growth_options");
  // The parent is upgraded too (the same command, over the home): name its new file.
  if (fs::path(meta.parent_checkpoint).extension() == ".pt") {
    meta.parent_checkpoint = fs::path(meta.parent_checkpoint).replace_extension(kCheckpointExtension).string();
  }
  return meta;
}

void copy_checked(const std::string& path, const std::string& name, const torch::Tensor& from, torch::Tensor to) {
  if (from.scalar_type() != to.scalar_type() || from.sizes() != to.sizes()) {
    throw UsageError(with_hint(fmt::format("{}: '{}' is {} {} in the file, the model its config builds holds {} {}",
                                           path, name, c10::toString(from.scalar_type()), c10::str(from.sizes()),
                                           c10::toString(to.scalar_type()), c10::str(to.sizes())),
                               "upgrade with the plugins (and tfw version) the run was trained with"));
  }
  torch::NoGradGuard no_grad;
  to.copy_(from);
}

// LibTorch wrote AdamW as param_groups/G.params/J = an id, and state.<id>.{step,exp_avg,…};
// group G, place J is this optimiser's parameter at the same place (the groups are built from
// the same config in the same order).
void legacy_optimizer(const Leaves& leaves, const std::string& path, torch::optim::AdamW& optimizer) {
  auto& groups = optimizer.param_groups();
  const std::string base = "optimizer.param_groups.param_groups/";
  if (leaves.has(base + std::to_string(groups.size()) + ".params/0")) {
    throw UsageError(
        fmt::format("{}: its optimiser has more parameter groups than the model's ({})", path, groups.size()));
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string prefix = base + std::to_string(g) + ".";
    auto& params = groups[g].params();
    if (leaves.has(prefix + "params/" + std::to_string(params.size()))) {
      throw UsageError(
          fmt::format("{}: optimiser group {} holds more parameters than the model's {}", path, g, params.size()));
    }
    const std::vector<double>& betas = leaves.get(prefix + "options.betas", ArchiveLeaf::Kind::reals).reals;
    if (betas.size() != 2) throw UsageError(fmt::format("{}: optimiser group {} has {} betas", path, g, betas.size()));
    static_cast<torch::optim::AdamWOptions&>(groups[g].options())
        .lr(leaves.real(prefix + "options.lr"))
        .betas({betas[0], betas[1]})
        .eps(leaves.real(prefix + "options.eps"))
        .weight_decay(leaves.real(prefix + "options.weight_decay"))
        .amsgrad(leaves.get(prefix + "options.amsgrad", ArchiveLeaf::Kind::boolean).integer != 0);
    for (std::size_t j = 0; j < params.size(); ++j) {
      const std::string id = leaves.text(prefix + "params/" + std::to_string(j));
      const std::string state = "optimizer.state." + id + ".";
      if (!leaves.has(state + "step")) continue;  // no step taken for it
      auto moment = [&](const std::string& key) {
        torch::Tensor value = torch::empty_like(params[j]);
        copy_checked(path, state + key, leaves.tensor(state + key), value);
        return value;
      };
      auto adamw = std::make_unique<torch::optim::AdamWParamState>();
      adamw->step(leaves.integer(state + "step"));
      adamw->exp_avg(moment("exp_avg"));
      adamw->exp_avg_sq(moment("exp_avg_sq"));
      if (leaves.has(state + "max_exp_avg_sq")) adamw->max_exp_avg_sq(moment("max_exp_avg_sq"));
      optimizer.state()[params[j].unsafeGetTensorImpl()] = std::move(adamw);
    }
  }
}

struct Built {
  std::shared_ptr<Model> model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
};

Built build(const Registry& registry, const RunConfig& config, bool with_optimizer) {
  Built built;
  built.model = registry.family(config.model.family).build(*config.model.spec, config.train.seed);
  if (with_optimizer) {
    built.optimizer = std::make_unique<torch::optim::AdamW>(optimizer_groups(*built.model, config.train),
                                                            torch::optim::AdamWOptions(config.train.lr));
  }
  return built;
}

// Every tensor of the upgraded model and optimiser equals the one read back, bit for bit.
void check_same(const std::string& path, const Built& a, const Built& b) {
  auto same = [&](const torch::Tensor& x, const torch::Tensor& y, const std::string& name) {
    if (x.defined() != y.defined() || (x.defined() && (x.sizes() != y.sizes() || !torch::equal(x, y)))) {
      throw Error(
          fmt::format("{}: the upgraded checkpoint reads back a different '{}'; the old file was kept", path, name));
    }
  };
  const auto ta = checkpoint_model_tensors(*a.model), tb = checkpoint_model_tensors(*b.model);
  if (ta.size() != tb.size()) throw Error(fmt::format("{}: the upgraded model reads back another shape", path));
  for (std::size_t i = 0; i < ta.size(); ++i) same(ta[i].second, tb[i].second, ta[i].first);
  if (!a.optimizer) return;
  const auto& ga = a.optimizer->param_groups();
  const auto& gb = b.optimizer->param_groups();
  for (std::size_t g = 0; g < ga.size(); ++g) {
    for (std::size_t j = 0; j < ga[g].params().size(); ++j) {
      auto sa = a.optimizer->state().find(ga[g].params()[j].unsafeGetTensorImpl());
      auto sb = b.optimizer->state().find(gb[g].params()[j].unsafeGetTensorImpl());
      if ((sa == a.optimizer->state().end()) != (sb == b.optimizer->state().end())) {
        throw Error(fmt::format("{}: the upgraded optimiser state differs; the old file was kept", path));
      }
      if (sa == a.optimizer->state().end()) continue;
      auto& x = static_cast<torch::optim::AdamWParamState&>(*sa->second);
      auto& y = static_cast<torch::optim::AdamWParamState&>(*sb->second);
      if (x.step() != y.step()) throw Error(fmt::format("{}: the upgraded optimiser step differs", path));
      same(x.exp_avg(), y.exp_avg(), "exp_avg");
      same(x.exp_avg_sq(), y.exp_avg_sq(), "exp_avg_sq");
      same(x.max_exp_avg_sq(), y.max_exp_avg_sq(), "max_exp_avg_sq");
    }
  }
}

}  // namespace

std::vector<std::string> checkpoint_legacy_find(const std::string& path) {
  std::vector<std::string> found;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (!is_legacy(path)) {
      throw UsageError(
          with_hint(fmt::format("'{}' is not a legacy tfw checkpoint (a .pt file with a version-1 manifest "
                                "beside it)",
                                path),
                    "name a .pt checkpoint, a run folder or a TFW_HOME"));
    }
    found.push_back(path);
    return found;
  }
  if (!fs::is_directory(path, ec)) throw UsageError(fmt::format("'{}' not found", path));
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && is_legacy(it->path())) found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string checkpoint_upgrade(const Registry& registry, const std::string& legacy_path) {
  checkpoint_verify_version(legacy_path, kCheckpointLegacyVersion);  // size and CRC-32 against its manifest
  const Leaves leaves(legacy_path, torch_archive_flatten(legacy_path));
  if (leaves.integer("format_version") != kCheckpointLegacyVersion) {
    throw UsageError(
        fmt::format("{}: says format version {} inside, not 1", legacy_path, leaves.integer("format_version")));
  }
  const CheckpointMeta meta = legacy_meta(leaves);
  const RunConfig config = checkpoint_run_config(registry, meta, legacy_path);
  bool has_optimizer = false;
  for (const auto& [key, leaf] : leaves.all()) has_optimizer = has_optimizer || key.rfind("optimizer.", 0) == 0;

  Built upgraded = build(registry, config, has_optimizer);
  const auto tensors = checkpoint_model_tensors(*upgraded.model);
  for (const auto& [name, tensor] : tensors) copy_checked(legacy_path, name, leaves.tensor("model." + name), tensor);
  const std::size_t model_tensors = tensors.size();
  std::size_t stored = 0;
  for (const auto& [key, leaf] : leaves.all())
    stored += key.rfind("model.", 0) == 0 && leaf.kind == ArchiveLeaf::Kind::tensor;
  if (stored != model_tensors) {
    throw UsageError(
        fmt::format("{}: holds {} model tensors, the model its config builds {}", legacy_path, stored, model_tensors));
  }
  if (has_optimizer) legacy_optimizer(leaves, legacy_path, *upgraded.optimizer);
  upgraded.model->set_training_step(meta.step);

  // Written with the old file's generator state, then the process's own is put back.
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  torch::Tensor own_rng;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    own_rng = generator.get_state();
    try {
      generator.set_state(leaves.tensor("torch_rng"));
    } catch (const c10::Error& e) {
      throw UsageError(
          fmt::format("{}: its random generator state is not valid ({})", legacy_path, e.what_without_backtrace()));
    }
  }
  const fs::path dir = fs::path(legacy_path).parent_path();
  const fs::path staging = dir / fmt::format(".upgrade-step-{:08d}", meta.step);
  fs::remove_all(staging);
  CheckpointInfo written;
  try {
    written = checkpoint_save(staging.string(), *upgraded.model, upgraded.optimizer.get(), meta);
    Built read_back = build(registry, config, has_optimizer);
    checkpoint_load(written.path, *read_back.model, read_back.optimizer.get());
    check_same(legacy_path, upgraded, read_back);
  } catch (...) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(own_rng);
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(own_rng);
  }
  // The new file, then its manifest over the old one (from here the checkpoint is the new
  // one), then the old archive.
  const fs::path target = fs::path(legacy_path).replace_extension(kCheckpointExtension);
  fs::rename(written.path, target);
  fs::rename(fs::path(written.path).replace_extension(".toml"), fs::path(legacy_path).replace_extension(".toml"));
  path_fsync(dir.string());
  fs::remove(legacy_path);
  fs::remove_all(staging);
  return target.string();
}

}  // namespace tfw
