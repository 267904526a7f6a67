// Run configuration files -> RunConfig. See run_config.h.
#include "engine/config/run_config.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/config/tokenizer_name.h"
#include "engine/core/home.h"
#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/core/sha256.h"
#include "engine/plugin/task.h"

namespace tfw {

namespace {
std::atomic<DeviceCheck> installed_device_check{nullptr};
}  // namespace

void device_check_install(DeviceCheck check) { installed_device_check.store(check); }

std::optional<DeviceProblem> device_check(const std::string& name) {
  if (const DeviceCheck check = installed_device_check.load()) return check(name);
  if (device_name_parse(name)) return std::nullopt;
  return DeviceProblem{fmt::format("\"{}\" is not a device", name), "use \"cpu\", \"cuda\" or \"cuda:N\""};
}

std::string mask_label(const std::vector<std::string>& use) { return fmt::format("{}", fmt::join(use, "+")); }

namespace {

void confined_or_fail(ConfigTable& table, const char* key, const std::string& path) {
  const std::string root = confine_root();
  if (root.empty() || path_inside(path, root)) return;
  table.fail(key, fmt::format("'{}' is outside {}, the folder this job may read", path, root),
             "a job of the engine service reads files only inside TFW_HOME: copy the file there");
}

// data.tokenizer: byte, gpt2, or a tokenizer.json (relative to the config file's folder;
// kept absolute in the resolved config, so that checkpoints find it from anywhere).
std::string tokenizer_parse(ConfigTable& table, const std::string& config_path) {
  const std::string name = table.get_string("tokenizer", "byte");
  if (name == "byte" || name == "gpt2") return name;
  if (!tokenizer_is_file(name)) {
    table.fail("tokenizer", fmt::format("unknown tokenizer '{}'", name),
               "use byte, gpt2, or the path of a Hugging Face tokenizer.json (a name ending in .json)");
  }
  std::filesystem::path path(name);
  if (path.is_relative() && !config_path.empty()) path = std::filesystem::path(config_path).parent_path() / path;
  // Confined (a job of the service, or a submission it plans): the resolved path, the one the
  // job opens, must be inside; checked before existence, so that the error says nothing of
  // files outside.
  confined_or_fail(table, "tokenizer", path.string());
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    table.fail("tokenizer", fmt::format("no such tokenizer.json: {}", path.string()),
               "a relative path is read from the config file's folder");
  }
  return std::filesystem::absolute(path).lexically_normal().string();
}

ImageDataConfig image_data_parse(ConfigTable& table, const std::string& config_path) {
  ImageDataConfig image;
  image.dataset = table.get_string("dataset", image.dataset);
  if (image.dataset != "fashion-mnist") {
    std::filesystem::path path(image.dataset);
    if (path.is_relative() && !config_path.empty()) path = std::filesystem::path(config_path).parent_path() / path;
    confined_or_fail(table, "dataset", path.string());
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      table.fail("dataset", fmt::format("'{}' is neither a built-in dataset nor a folder", image.dataset),
                 "use \"fashion-mnist\" or a folder holding the IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte"
                 "[.gz]; a relative path is read from the config file's folder");
    }
    image.dataset = std::filesystem::absolute(path).lexically_normal().string();
  }
  image.validation = table.get_choice("validation", image.validation, {"test", "tuning"});
  image.tuning_size = table.get_int("tuning_size", image.tuning_size);
  if (image.tuning_size < 1) {
    table.fail("tuning_size", fmt::format("must be at least 1, got {}", image.tuning_size),
               "the number of training images held out for validation when validation = \"tuning\"");
  }
  image.crop_pad = table.get_int("crop_pad", image.crop_pad);
  if (image.crop_pad < 0 || image.crop_pad > 64) {
    table.fail("crop_pad", fmt::format("must be in 0..64, got {}", image.crop_pad),
               "the pixels of zero padding before a random crop; 0 turns cropping off");
  }
  image.flip = table.get_bool("flip", image.flip);
  return image;
}

DataConfig data_parse(ConfigTable& table, const std::string& config_path, Task task) {
  DataConfig data;
  data.task = task;
  if (task == Task::image_classification) {
    data.image = image_data_parse(table, config_path);
    return data;
  }
  data.corpus = table.get_string("corpus", data.corpus);
  data.tokenizer = tokenizer_parse(table, config_path);
  data.eval_corpora = table.get_string_array("eval_corpora");
  for (const std::string& corpus : data.eval_corpora) {
    if (corpus.empty()) table.fail("eval_corpora", "holds an empty name", "name a corpus: eval_corpora = [\"gcide\"]");
    if (corpus == data.corpus) {
      table.fail("eval_corpora", fmt::format("'{}' is the run's own corpus, which is evaluated anyway", corpus),
                 "list only other corpora");
    }
  }
  return data;
}

toml::table data_to_toml(const DataConfig& data) {
  if (data.task == Task::image_classification) {
    const ImageDataConfig& image = data.image;
    return toml::table{{"dataset", image.dataset}, {"validation", image.validation}, {"tuning_size", image.tuning_size},
                       {"crop_pad", image.crop_pad}, {"flip", image.flip}};
  }
  toml::table table{{"corpus", data.corpus}, {"tokenizer", data.tokenizer}};
  if (!data.eval_corpora.empty()) {  // absent when empty: older stored configs stay byte-identical
    toml::array corpora;
    for (const std::string& corpus : data.eval_corpora) corpora.push_back(corpus);
    table.insert("eval_corpora", std::move(corpora));
  }
  return table;
}

constexpr std::int64_t kMaxEvalBatches = 1000000;
// A learning rate above this is no learning rate (1e300 overflowed a float in the optimiser).
constexpr double kMaxLearningRate = 100;

template <typename T>
T at_least(ConfigTable& table, const char* key, T value, T minimum) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) table.fail(key, fmt::format("must be a finite number, got {}", value), "");
  }
  if (value < minimum) table.fail(key, fmt::format("must be at least {}, got {}", minimum, value), "");
  return value;
}

double in_unit_interval(ConfigTable& table, const char* key, double value) {
  if (!std::isfinite(value) || value < 0 || value >= 1) {
    table.fail(key, fmt::format("must be in [0, 1), got {}", value), "AdamW's betas are typically 0.9 and 0.95");
  }
  return value;
}

// [train.mask]: blocks = { NAME = { PROJECTION = [start, end], ... }, ... }, use = [NAME, ...].
MaskConfig mask_parse(ConfigTable& t) {
  MaskConfig c;
  ConfigTable blocks = t.sub("blocks");
  for (const auto& [name_key, node] : blocks.raw_self()) {
    const std::string name(name_key.str());
    ConfigTable block_table = blocks.sub(name);
    MaskBlock block{name, {}};
    for (const auto& [projection_key, range] : *node.as_table()) {
      const std::string projection(projection_key.str());
      block_table.take(projection);
      const toml::array* a = range.as_array();
      if (a == nullptr || a->size() != 2 || !(*a)[0].is_integer() || !(*a)[1].is_integer()) {
        block_table.fail(projection, "expected a token range [start, end]", "write two integers, e.g. [0, 32]");
      }
      const std::int64_t start = (*a)[0].value_or(std::int64_t{0}), end = (*a)[1].value_or(std::int64_t{0});
      if (start < 0 || end <= start) {
        block_table.fail(projection, fmt::format("the range [{}, {}] is empty or negative", start, end),
                         "give 0 <= start < end: the tokens start..end-1");
      }
      block.ranges.push_back({projection, start, end});
    }
    block_table.finish();
    if (block.ranges.empty()) blocks.fail(name, "a block with no token ranges", "give at least one, e.g. attn = [0, 32]");
    c.blocks.push_back(std::move(block));
  }
  blocks.finish();
  c.use = t.get_string_array("use");
  for (const std::string& name : c.use) {
    if (c.block(name) == nullptr) {
      t.fail("use", fmt::format("no block named '{}' in train.mask.blocks", name),
             c.blocks.empty() ? "define it: [train.mask.blocks] " + name + " = { attn = [0, 32], ffn = [0, 128] }"
                              : "use one of the blocks defined in [train.mask.blocks]");
    }
  }
  return c;
}

toml::table mask_to_toml(const MaskConfig& c) {
  toml::table blocks;
  for (const MaskBlock& b : c.blocks) {
    toml::table ranges;
    for (const MaskRange& r : b.ranges) ranges.insert(r.projection, toml::array{r.start, r.end});
    blocks.insert(b.name, std::move(ranges));
  }
  toml::array use;
  for (const std::string& name : c.use) use.push_back(name);
  return toml::table{{"blocks", std::move(blocks)}, {"use", std::move(use)}};
}

TrainConfig train_parse(ConfigTable& t) {
  TrainConfig c;
  c.seed = static_cast<std::uint64_t>(at_least<std::int64_t>(t, "seed", t.get_int("seed", 0), 0));
  c.batch_size = config_size(t, "batch_size", t.get_int("batch_size", c.batch_size));
  c.grad_accum = config_size(t, "grad_accum", t.get_int("grad_accum", c.grad_accum));
  c.seq_len = at_least<std::int64_t>(t, "seq_len", t.get_int("seq_len", c.seq_len), 0);
  if (c.seq_len > kMaxWidth) config_size(t, "seq_len", c.seq_len);
  c.lr = at_least(t, "lr", t.get_double("lr", c.lr), 0.0);
  if (c.lr > kMaxLearningRate) {
    t.fail("lr", fmt::format("must be at most {:g}, got {:g}", kMaxLearningRate, c.lr),
           "AdamW's learning rates are around 1e-4 to 1e-2");
  }
  c.min_lr_ratio = at_least(t, "min_lr_ratio", t.get_double("min_lr_ratio", c.min_lr_ratio), 0.0);
  c.warmup_steps = at_least<std::int64_t>(t, "warmup_steps", t.get_int("warmup_steps", c.warmup_steps), -1);
  c.warmup_fraction = at_least(t, "warmup_fraction", t.get_double("warmup_fraction", c.warmup_fraction), 0.0);
  c.beta1 = in_unit_interval(t, "beta1", t.get_double("beta1", c.beta1));
  c.beta2 = in_unit_interval(t, "beta2", t.get_double("beta2", c.beta2));
  c.eps = at_least(t, "eps", t.get_double("eps", c.eps), 0.0);
  c.weight_decay = at_least(t, "weight_decay", t.get_double("weight_decay", c.weight_decay), 0.0);
  c.grad_clip = at_least(t, "grad_clip", t.get_double("grad_clip", c.grad_clip), 0.0);
  c.max_steps = at_least<std::int64_t>(t, "max_steps", t.get_int("max_steps", 0), 0);
  c.schedule_steps = at_least<std::int64_t>(t, "schedule_steps", t.get_int("schedule_steps", 0), 0);
  c.max_tokens = at_least(t, "max_tokens", t.get_double("max_tokens", 0), 0.0);
  c.max_flops = at_least(t, "max_flops", t.get_double("max_flops", 0), 0.0);
  int budgets = (c.max_steps > 0) + (c.max_tokens > 0) + (c.max_flops > 0);
  if (budgets > 1) {
    t.fail(c.max_steps > 0 ? "max_steps" : "max_tokens", "more than one budget is set",
           "set exactly one of train.max_steps, train.max_tokens, train.max_flops");
  }
  c.eval_every = at_least<std::int64_t>(t, "eval_every", t.get_int("eval_every", c.eval_every), 1);
  c.eval_batches = at_least<std::int64_t>(t, "eval_batches", t.get_int("eval_batches", c.eval_batches), 1);
  // An evaluation of 2^63 batches never ends: bounded, as every count a file gives is.
  if (c.eval_batches > kMaxEvalBatches) {
    t.fail("eval_batches", fmt::format("must be at most {}, got {}", kMaxEvalBatches, c.eval_batches),
           "an evaluation reads eval_batches × batch_size windows; a few dozen batches are usual");
  }
  c.checkpoint_every =
      at_least<std::int64_t>(t, "checkpoint_every", t.get_int("checkpoint_every", c.checkpoint_every), 1);
  c.keep_checkpoints =
      at_least<std::int64_t>(t, "keep_checkpoints", t.get_int("keep_checkpoints", c.keep_checkpoints), 1);
  c.nan_policy = *nan_policy_parse(t.get_choice("nan_policy", nan_policy_name(c.nan_policy), {"stop", "skip"}));
  c.log_every = at_least<std::int64_t>(t, "log_every", t.get_int("log_every", c.log_every), 1);
  c.peak_flops = at_least(t, "peak_flops", t.get_double("peak_flops", 0), 0.0);
  c.precision = precision_parse(t.get_choice("precision", precision_name(c.precision), {"fp32", "bf16"}));
  const std::string device = t.get_string("device", c.device.text());
  if (std::optional<DeviceProblem> problem = device_check(device)) {
    t.fail("device", problem->message, problem->hint);
  }
  // device_check() let only "cpu", "cuda" and "cuda:N" through, and LibTorch only N without
  // a leading zero: the text parses, and prints back as it was written.
  const std::optional<DeviceName> parsed = device_name_parse(device);
  if (!parsed) t.fail("device", fmt::format("\"{}\" is not a device", device), "use \"cpu\", \"cuda\" or \"cuda:N\"");
  c.device = *parsed;
  c.tf32 = t.get_bool("tf32", c.tf32);
  if (c.tf32 && !c.device.is_cuda()) {
    t.fail("tf32", "TF32 matrix products are a CUDA setting, and train.device is \"cpu\"",
           "remove train.tf32, or set train.device = \"cuda\"");
  }
  for (ConfigTable& event_table : t.sub_array("growth")) {
    GrowthEvent event;
    event.at_step = at_least<std::int64_t>(event_table, "at_step", event_table.require_int("at_step"), 1);
    event.method = event_table.require_string("method");
    event.to = event_table.raw_table("to");
    event.add_attn = at_least<std::int64_t>(event_table, "add_attn", event_table.get_int("add_attn", 0), 0);
    event.add_ffn = at_least<std::int64_t>(event_table, "add_ffn", event_table.get_int("add_ffn", 0), 0);
    event.options = event_table.raw_table("options");
    event_table.finish();
    if (!c.growth.empty() && event.at_step <= c.growth.back().at_step) {
      event_table.fail("at_step", "growth events must be in increasing step order", "sort the [[train.growth]] tables");
    }
    c.growth.push_back(std::move(event));
  }
  const bool repeat_given = t.has("growth_repeat");
  ConfigTable repeat = t.sub("growth_repeat");
  GrowthRepeat& r = c.growth_repeat;
  // A [train.growth_repeat] table that never grows was silently ignored.
  r.every_steps = at_least<std::int64_t>(repeat, "every_steps", repeat.get_int("every_steps", 0), repeat_given ? 1 : 0);
  r.start_step = at_least<std::int64_t>(repeat, "start_step", repeat.get_int("start_step", r.every_steps), 0);
  r.stop_step = at_least<std::int64_t>(repeat, "stop_step", repeat.get_int("stop_step", 0), 0);
  r.add_attn = at_least<std::int64_t>(repeat, "add_attn", repeat.get_int("add_attn", 0), 0);
  r.add_ffn = at_least<std::int64_t>(repeat, "add_ffn", repeat.get_int("add_ffn", 0), 0);
  r.method = repeat.get_string("method", r.method);
  r.options = repeat.raw_table("options");
  repeat.finish();
  ConfigTable mask = t.sub("mask");
  c.mask = mask_parse(mask);
  mask.finish();
  if ((!c.growth.empty() || r.every_steps > 0) && c.max_flops > 0) {
    t.fail("max_flops", "a run with growth events cannot budget training FLOPs (the FLOPs per step change)",
           "budget the run in train.max_steps or train.max_tokens");
  }
  return c;
}

toml::table train_to_toml(const TrainConfig& c) {
  toml::table t{{"seed", static_cast<std::int64_t>(c.seed)}, {"batch_size", c.batch_size},
                {"grad_accum", c.grad_accum}, {"seq_len", c.seq_len}, {"lr", c.lr},
                {"min_lr_ratio", c.min_lr_ratio}, {"warmup_steps", c.warmup_steps},
                {"warmup_fraction", c.warmup_fraction}, {"beta1", c.beta1}, {"beta2", c.beta2},
                {"eps", c.eps}, {"weight_decay", c.weight_decay}, {"grad_clip", c.grad_clip},
                {"eval_every", c.eval_every}, {"eval_batches", c.eval_batches},
                {"checkpoint_every", c.checkpoint_every}, {"keep_checkpoints", c.keep_checkpoints},
                {"nan_policy", nan_policy_name(c.nan_policy)}, {"log_every", c.log_every}};
  if (c.max_steps > 0) t.insert("max_steps", c.max_steps);
  if (c.max_tokens > 0) t.insert("max_tokens", c.max_tokens);
  if (c.max_flops > 0) t.insert("max_flops", c.max_flops);
  if (c.peak_flops > 0) t.insert("peak_flops", c.peak_flops);
  if (c.precision != Precision::fp32) t.insert("precision", precision_name(c.precision));
  if (c.device.is_cuda()) t.insert("device", c.device.text());
  if (c.tf32) t.insert("tf32", true);
  if (c.schedule_steps > 0) t.insert("schedule_steps", c.schedule_steps);
  if (!c.growth.empty()) {
    toml::array events;
    for (const GrowthEvent& e : c.growth) {
      toml::table event{{"at_step", e.at_step}, {"method", e.method}, {"to", e.to}, {"options", e.options}};
      if (e.add_attn > 0) event.insert("add_attn", e.add_attn);
      if (e.add_ffn > 0) event.insert("add_ffn", e.add_ffn);
      events.push_back(std::move(event));
    }
    t.insert("growth", std::move(events));
  }
  if (!c.mask.blocks.empty()) t.insert("mask", mask_to_toml(c.mask));
  if (c.growth_repeat.every_steps > 0) {
    const GrowthRepeat& r = c.growth_repeat;
    t.insert("growth_repeat", toml::table{{"every_steps", r.every_steps}, {"start_step", r.start_step},
                                          {"stop_step", r.stop_step}, {"add_attn", r.add_attn},
                                          {"add_ffn", r.add_ffn}, {"method", r.method}, {"options", r.options}});
  }
  return t;
}

}  // namespace

RunConfig run_config_parse(const Registry& registry, const toml::table& table, const std::string& path) {
  ConfigTable top(table, "");
  RunConfig config;
  ModelConfig& model = config.model;
  model.path = path;
  model.name = top.get_string("name", std::filesystem::path(path).stem().string());
  model.description = top.get_string("description", "");
  model.family = top.require_string("family");
  const ModelFamily* family = nullptr;
  try {
    family = &registry.family(model.family);
  } catch (const UsageError& e) {
    top.fail("family", e.what(), "");
  }
  ConfigTable model_table = top.sub("model");
  model.spec = family->parse(model_table);
  model_table.finish();
  // The registry refuses a family whose task this tfw does not know (task_known).
  const std::optional<Task> task = task_parse(family->task());
  if (!task) {
    top.fail("family", fmt::format("model family '{}' declares the unknown task '{}'", model.family, family->task()),
             "");
  }
  ConfigTable data_table = top.sub("data");
  config.data = data_parse(data_table, path, *task);
  data_table.finish();
  ConfigTable train_table = top.sub("train");
  config.train = train_parse(train_table);
  train_table.finish();
  top.finish();
  return config;
}

toml::table run_config_to_toml(const RunConfig& config) {
  const ModelConfig& model = config.model;
  toml::table table{{"name", model.name}, {"family", model.family}, {"model", model.spec->to_toml()},
                    {"data", data_to_toml(config.data)}, {"train", train_to_toml(config.train)}};
  if (!model.description.empty()) table.insert("description", model.description);
  return table;
}

std::string run_config_text(const RunConfig& config) {
  std::ostringstream text;
  text << run_config_to_toml(config);
  return text.str();
}

std::string config_identity(const toml::table& table) {
  // As JSON: TOML's printer keeps how a file wrote a table (inline or not), JSON has one form.
  std::ostringstream text;
  text << toml::json_formatter{table};
  return sha256_hex(text.str());
}

RunConfig run_config_load(const Registry& registry, const std::string& path,
                          const std::vector<std::string>& overrides) {
  toml::table table = config_read_file(path);
  config_apply_overrides(table, overrides);
  return run_config_parse(registry, table, path);
}

ModelConfig model_config_parse(const Registry& registry, const toml::table& table, const std::string& path) {
  return run_config_parse(registry, table, path).model;
}

ModelConfig model_config_load(const Registry& registry, const std::string& path,
                              const std::vector<std::string>& overrides) {
  return run_config_load(registry, path, overrides).model;
}

}  // namespace tfw
