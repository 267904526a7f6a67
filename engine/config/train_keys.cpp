// [train] as one list of keys (train_keys.h): each key read, checked and written back in one
// place; train_parse walks the list and then checks what spans keys.
#include "engine/config/train_keys.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "engine/config/growth_script.h"

namespace tfw {

namespace {

constexpr std::int64_t kMaxEvalBatches = 1000000;
// A learning rate above this is no learning rate (1e300 overflowed a float in the optimiser).
constexpr double kMaxLearningRate = 100;
// train.memory_limit_gb: a million GB (a petabyte), far past any one machine; NaN and inf refused.
constexpr double kMaxMemoryLimitGb = 1e6;

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
    if (block.ranges.empty())
      blocks.fail(name, "a block with no token ranges", "give at least one, e.g. attn = [0, 32]");
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

// A growth by script's options pinned to their script (engine/config/growth_script.h), read
// from the folder of the file that names it; other methods' options as they are.
void growth_options_pin(const std::string& method, const ConfigTable& table, toml::table& options) {
  if (method != kScriptGrowthMethod) return;
  const toml::node* script = table.raw_self()["options"]["script"].node();
  growth_script_pin(options, script != nullptr ? toml_source_dir(*script) : "");
}

GrowthEvent growth_event_parse(ConfigTable& event_table) {
  GrowthEvent event;
  event.at_step = at_least<std::int64_t>(event_table, "at_step", event_table.require_int("at_step"), 1);
  event.method = event_table.require_string("method");
  event.to = event_table.raw_table("to");
  event.add_attn = at_least<std::int64_t>(event_table, "add_attn", event_table.get_int("add_attn", 0), 0);
  event.add_ffn = at_least<std::int64_t>(event_table, "add_ffn", event_table.get_int("add_ffn", 0), 0);
  event.options = event_table.raw_table("options");
  event_table.finish();
  growth_options_pin(event.method, event_table, event.options);
  return event;
}

void growth_read(ConfigTable& t, const char* key, TrainConfig& c) {
  for (ConfigTable& event_table : t.sub_array(key)) {
    GrowthEvent event = growth_event_parse(event_table);
    if (!c.growth.empty() && event.at_step <= c.growth.back().at_step) {
      event_table.fail("at_step", "growth events must be in increasing step order", "sort the [[train.growth]] tables");
    }
    c.growth.push_back(std::move(event));
  }
}

void growth_write(const TrainConfig& c, const char* key, toml::table& t) {
  if (c.growth.empty()) return;
  toml::array events;
  for (const GrowthEvent& e : c.growth) {
    toml::table event{{"at_step", e.at_step}, {"method", e.method}, {"to", e.to}, {"options", e.options}};
    if (e.add_attn > 0) event.insert("add_attn", e.add_attn);
    if (e.add_ffn > 0) event.insert("add_ffn", e.add_ffn);
    events.push_back(std::move(event));
  }
  t.insert(key, std::move(events));
}

void growth_repeat_read(ConfigTable& t, const char* key, TrainConfig& c) {
  const bool given = t.has(key);
  ConfigTable repeat = t.sub(key);
  GrowthRepeat& r = c.growth_repeat;
  // A [train.growth_repeat] table that never grows was silently ignored.
  r.every_steps = at_least<std::int64_t>(repeat, "every_steps", repeat.get_int("every_steps", 0), given ? 1 : 0);
  r.start_step = at_least<std::int64_t>(repeat, "start_step", repeat.get_int("start_step", r.every_steps), 0);
  r.stop_step = at_least<std::int64_t>(repeat, "stop_step", repeat.get_int("stop_step", 0), 0);
  r.add_attn = at_least<std::int64_t>(repeat, "add_attn", repeat.get_int("add_attn", 0), 0);
  r.add_ffn = at_least<std::int64_t>(repeat, "add_ffn", repeat.get_int("add_ffn", 0), 0);
  r.method = repeat.get_string("method", r.method);
  r.options = repeat.raw_table("options");
  repeat.finish();
  growth_options_pin(r.method, repeat, r.options);
}

void growth_repeat_write(const TrainConfig& c, const char* key, toml::table& t) {
  if (c.growth_repeat.every_steps <= 0) return;
  const GrowthRepeat& r = c.growth_repeat;
  t.insert(key, toml::table{{"every_steps", r.every_steps},
                            {"start_step", r.start_step},
                            {"stop_step", r.stop_step},
                            {"add_attn", r.add_attn},
                            {"add_ffn", r.add_ffn},
                            {"method", r.method},
                            {"options", r.options}});
}

void mask_read(ConfigTable& t, const char* key, TrainConfig& c) {
  ConfigTable mask = t.sub(key);
  c.mask = mask_parse(mask);
  mask.finish();
}

void mask_write(const TrainConfig& c, const char* key, toml::table& t) {
  if (!c.mask.blocks.empty()) t.insert(key, mask_to_toml(c.mask));
}

void device_read(ConfigTable& t, const char* key, TrainConfig& c) {
  const std::string device = t.get_string(key, c.device.text());
  if (std::optional<DeviceProblem> problem = device_check(device)) t.fail(key, problem->message, problem->hint);
  c.device = *device_name_parse(device);  // device_check passes only what it reads
}

// Written always: the resolved config states it.
template <auto Member>
void always(const TrainConfig& c, const char* key, toml::table& t) {
  t.insert(key, c.*Member);
}

// Written only when set (above 0): older stored configs, from before the key, stay byte-identical.
template <auto Member>
void when_set(const TrainConfig& c, const char* key, toml::table& t) {
  if (c.*Member > 0) t.insert(key, c.*Member);
}

// A count of at least `minimum`.
template <auto Member, std::int64_t minimum>
void count(ConfigTable& t, const char* key, TrainConfig& c) {
  c.*Member = at_least<std::int64_t>(t, key, t.get_int(key, c.*Member), minimum);
}

// A real number of at least 0.
template <auto Member>
void non_negative(ConfigTable& t, const char* key, TrainConfig& c) {
  c.*Member = at_least(t, key, t.get_double(key, c.*Member), 0.0);
}

// A size (at least 1, bounded: config_table.h's config_size).
template <auto Member>
void size(ConfigTable& t, const char* key, TrainConfig& c) {
  c.*Member = config_size(t, key, t.get_int(key, c.*Member));
}

template <auto Member>
void beta(ConfigTable& t, const char* key, TrainConfig& c) {
  c.*Member = in_unit_interval(t, key, t.get_double(key, c.*Member));
}

using C = TrainConfig;

const std::vector<TrainKey> kTrainKeys = {
    {"seed",
     [](ConfigTable& t, const char* key, C& c) {
       c.seed = static_cast<std::uint64_t>(at_least<std::int64_t>(t, key, t.get_int(key, 0), 0));
     },
     [](const C& c, const char* key, toml::table& t) { t.insert(key, static_cast<std::int64_t>(c.seed)); }},
    {"batch_size", size<&C::batch_size>, always<&C::batch_size>},
    {"grad_accum",
     [](ConfigTable& t, const char* key, C& c) {
       // A number of micro-batches, or "auto": the fewest that fit (grad_accum_auto).
       const toml::node* node = t.raw_self().get(key);
       if (node == nullptr || !node->is_string()) return size<&C::grad_accum>(t, key, c);
       const std::string given = t.get_string(key, "");
       if (given != "auto") {
         t.fail(key, fmt::format("must be a whole number of micro-batches or \"auto\", got \"{}\"", given),
                "write grad_accum = 4 (a number, without quotes), or grad_accum = \"auto\" to let the memory check "
                "split train.batch_size into micro-batches that fit");
       }
       c.grad_accum_auto = true;
       c.grad_accum = 1;
     },
     [](const C& c, const char* key, toml::table& t) {
       if (c.grad_accum_auto) {
         t.insert(key, "auto");
       } else {
         t.insert(key, c.grad_accum);
       }
     }},
    {"memory_limit_gb",
     [](ConfigTable& t, const char* key, C& c) {
       non_negative<&C::memory_limit_gb>(t, key, c);
       if (c.memory_limit_gb > kMaxMemoryLimitGb) {
         t.fail(key, fmt::format("must be at most {:g}, got {:g}", kMaxMemoryLimitGb, c.memory_limit_gb),
                "give the memory in GB (1e9 bytes): 70 for most of an 80 GB GPU; leave it out for all of it");
       }
     },
     when_set<&C::memory_limit_gb>},
    {"seq_len",
     [](ConfigTable& t, const char* key, C& c) {
       count<&C::seq_len, 0>(t, key, c);
       if (c.seq_len > kMaxWidth) config_size(t, key, c.seq_len);
     },
     always<&C::seq_len>},
    {"lr",
     [](ConfigTable& t, const char* key, C& c) {
       non_negative<&C::lr>(t, key, c);
       if (c.lr > kMaxLearningRate) {
         t.fail(key, fmt::format("must be at most {:g}, got {:g}", kMaxLearningRate, c.lr),
                "AdamW's learning rates are around 1e-4 to 1e-2");
       }
     },
     always<&C::lr>},
    {"min_lr_ratio", non_negative<&C::min_lr_ratio>, always<&C::min_lr_ratio>},
    {"warmup_steps", count<&C::warmup_steps, -1>, always<&C::warmup_steps>},
    {"warmup_fraction", non_negative<&C::warmup_fraction>, always<&C::warmup_fraction>},
    {"beta1", beta<&C::beta1>, always<&C::beta1>},
    {"beta2", beta<&C::beta2>, always<&C::beta2>},
    {"eps", non_negative<&C::eps>, always<&C::eps>},
    {"weight_decay", non_negative<&C::weight_decay>, always<&C::weight_decay>},
    {"grad_clip", non_negative<&C::grad_clip>, always<&C::grad_clip>},
    {"max_steps", count<&C::max_steps, 0>, when_set<&C::max_steps>},
    {"schedule_steps", count<&C::schedule_steps, 0>, when_set<&C::schedule_steps>},
    {"max_tokens", non_negative<&C::max_tokens>, when_set<&C::max_tokens>},
    {"max_flops", non_negative<&C::max_flops>, when_set<&C::max_flops>},
    {"eval_every", count<&C::eval_every, 1>, always<&C::eval_every>},
    {"eval_batches",
     [](ConfigTable& t, const char* key, C& c) {
       count<&C::eval_batches, 1>(t, key, c);
       // An evaluation of 2^63 batches never ends: bounded, as every count a file gives is.
       if (c.eval_batches > kMaxEvalBatches) {
         t.fail(key, fmt::format("must be at most {}, got {}", kMaxEvalBatches, c.eval_batches),
                "an evaluation reads eval_batches × batch_size windows; a few dozen batches are usual");
       }
     },
     always<&C::eval_batches>},
    {"checkpoint_every", count<&C::checkpoint_every, 1>, always<&C::checkpoint_every>},
    {"keep_checkpoints", count<&C::keep_checkpoints, 1>, always<&C::keep_checkpoints>},
    {"nan_policy",
     [](ConfigTable& t, const char* key, C& c) {
       c.nan_policy = *nan_policy_parse(t.get_choice(key, nan_policy_name(c.nan_policy), {"stop", "skip"}));
     },
     [](const C& c, const char* key, toml::table& t) { t.insert(key, nan_policy_name(c.nan_policy)); }},
    {"log_every", count<&C::log_every, 1>, always<&C::log_every>},
    {"peak_flops", non_negative<&C::peak_flops>, when_set<&C::peak_flops>},
    {"precision",
     [](ConfigTable& t, const char* key, C& c) {
       c.precision = precision_parse(t.get_choice(key, precision_name(c.precision), {"fp32", "bf16"}));
     },
     [](const C& c, const char* key, toml::table& t) {
       if (c.precision != Precision::fp32) t.insert(key, precision_name(c.precision));
     }},
    {"device", device_read,
     [](const C& c, const char* key, toml::table& t) {
       if (c.device.is_cuda()) t.insert(key, c.device.text());
     }},
    {"tf32", [](ConfigTable& t, const char* key, C& c) { c.tf32 = t.get_bool(key, c.tf32); },
     [](const C& c, const char* key, toml::table& t) {
       if (c.tf32) t.insert(key, true);
     }},
    {"growth", growth_read, growth_write},
    {"growth_repeat", growth_repeat_read, growth_repeat_write},
    {"mask", mask_read, mask_write},
};

}  // namespace

const std::vector<TrainKey>& train_keys() { return kTrainKeys; }

TrainConfig train_parse(ConfigTable& t) {
  TrainConfig c;
  for (const TrainKey& key : kTrainKeys) key.read(t, key.name, c);
  // What spans keys.
  if ((c.max_steps > 0) + (c.max_tokens > 0) + (c.max_flops > 0) > 1) {
    t.fail(c.max_steps > 0 ? "max_steps" : "max_tokens", "more than one budget is set",
           "set exactly one of train.max_steps, train.max_tokens, train.max_flops");
  }
  if (c.tf32 && !c.device.is_cuda()) {
    t.fail("tf32", "TF32 matrix products are a CUDA setting, and train.device is \"cpu\"",
           "remove train.tf32, or set train.device = \"cuda\"");
  }
  if ((!c.growth.empty() || c.growth_repeat.every_steps > 0) && c.max_flops > 0) {
    t.fail("max_flops", "a run with growth events cannot budget training FLOPs (the FLOPs per step change)",
           "budget the run in train.max_steps or train.max_tokens");
  }
  return c;
}

toml::table train_to_toml(const TrainConfig& c) {
  toml::table t;
  for (const TrainKey& key : kTrainKeys) key.write(c, key.name, t);
  return t;
}

}  // namespace tfw
