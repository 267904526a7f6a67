// A run configuration file: `family`, the [model] table (parsed by the family's plugin
// into a typed ModelSpec), [data] and [train]. Every table is validated whichever command
// reads the file, so `tfw params` on a training config still rejects a misspelt [train]
// key; every key not read is an error naming file:line:col. Choices are typed (Task,
// Precision, NanPolicy, DeviceName): parsed once here, written back as the same text by
// run_config_to_toml. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/config/device_name.h"
#include "engine/plugin/plugin_api.h"
#include "engine/config/precision.h"
#include "engine/plugin/task.h"

namespace tfw {

class Registry;

struct ModelConfig {
  std::string path;  // the file it came from
  std::string name;  // `name` key, or the file's stem
  std::string description;
  std::string family;
  std::shared_ptr<const ModelSpec> spec;
};

// [data] of an image-classification run (docs/configs.md, "Images"; engine/data/images.h).
struct ImageDataConfig {
  // "fashion-mnist" (Debian's dataset-fashion-mnist), or a folder holding the four IDX files
  // {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
  std::string dataset = "fashion-mnist";
  // "test": validate on the official test split, train on all of the training split;
  // "tuning": validate on the last tuning_size images of the training split and train on the
  // others (the test split stays unseen while choosing settings).
  std::string validation = "test";
  std::int64_t tuning_size = 10000;
  std::int64_t crop_pad = 0;  // augmentation: zero-pad by this many pixels, crop at a random offset (0: none)
  bool flip = false;          // augmentation: mirror left-right with probability 1/2
};

// [data]: its keys depend on the family's task (engine/plugin/task.h): a corpus and a tokenizer for a
// language model, an image dataset for an image classifier.
struct DataConfig {
  Task task = Task::language_model;  // engine/plugin/task.h: the family's, not a key
  ImageDataConfig image;             // image_classification
  std::string corpus = "gcide";      // built-in name, text file or folder, or a prepared shard folder
  std::string tokenizer = "byte";
  // Further corpora evaluated beside the run's own at every evaluation (same tokenizer, same
  // window positions), recorded as val/loss@NAME: how much of an earlier corpus a run keeps.
  std::vector<std::string> eval_corpora;
};

// A growth event inside a run (docs/design/GROWTH.md): at `at_step`, grow the model with `method` to the
// current [model] table changed by `to` (absolute keys) and by add_attn / add_ffn (token
// increments, for the repeated schedule of the student report), with `options`.
struct GrowthEvent {
  std::int64_t at_step = 0;
  std::string method;
  toml::table to;
  std::int64_t add_attn = 0, add_ffn = 0;
  toml::table options;
};

// [train.growth_repeat]: add add_attn / add_ffn tokens every `every_steps` steps, from
// start_step (default every_steps) up to stop_step (default: the end of the run).
struct GrowthRepeat {
  std::int64_t every_steps = 0, start_step = 0, stop_step = 0, add_attn = 0, add_ffn = 0;
  std::string method = "pattention_grow";
  toml::table options;
};

// [train.mask]: named ranges of parameter tokens, per projection (docs/configs.md, "Parameter
// masks"); engine/nn/mask.h applies them.
struct MaskRange {
  std::string projection;           // a Pattention's name in its layer: q, k, v, o, ffn ("attn": q, k, v, o)
  std::int64_t start = 0, end = 0;  // the tokens [start, end)
};
struct MaskBlock {
  std::string name;
  std::vector<MaskRange> ranges;
};
struct MaskConfig {
  std::vector<MaskBlock> blocks;
  std::vector<std::string> use;  // the blocks the run trains and evaluates with; empty: every token
  const MaskBlock* block(const std::string& name) const {
    for (const MaskBlock& b : blocks) {
      if (b.name == name) return &b;
    }
    return nullptr;
  }
};

// What a run trains on, for people: the corpus of a language model, the dataset of an image
// classifier.
inline const std::string& data_name(const DataConfig& data) {
  return data.task == Task::image_classification ? data.image.dataset : data.corpus;
}

// train.nan_policy, what a NaN or infinite loss does: stop raises, skip drops the update.
enum class NanPolicy { stop, skip };

inline std::string nan_policy_name(NanPolicy policy) { return policy == NanPolicy::skip ? "skip" : "stop"; }

// "stop" | "skip"; nullopt for anything else.
inline std::optional<NanPolicy> nan_policy_parse(const std::string& name) {
  if (name == "stop") return NanPolicy::stop;
  if (name == "skip") return NanPolicy::skip;
  return std::nullopt;
}

// How a set of blocks is named in evaluations and reports: "a+b"; "" for every token.
std::string mask_label(const std::vector<std::string>& use);

struct TrainConfig {
  std::uint64_t seed = 0;
  std::int64_t batch_size = 16;  // sequences per micro-batch (with grad_accum_auto: per step)
  std::int64_t grad_accum = 1;   // micro-batches per optimiser step
  // grad_accum = "auto": batch_size is the step's batch, and the trainer splits it into the
  // fewest micro-batches that fit the memory there is (engine/machine/memory_check.h,
  // micro_batch_choose); grad_accum stays 1 here, so the plan's examples per step are batch_size.
  bool grad_accum_auto = false;
  // The most memory, in GB (1e9 bytes), the memory check lets a training plan for; 0: all the
  // device has (a GPU's free memory, or the machine's). For a shared GPU, or a test.
  double memory_limit_gb = 0;
  std::int64_t seq_len = 0;  // 0: the model's seq_len
  double lr = 6e-4;
  double min_lr_ratio = 0.1;       // cosine decays to min_lr_ratio × lr (0 decays to 0)
  std::int64_t warmup_steps = -1;  // -1: warmup_fraction of the steps
  double warmup_fraction = 0.01;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // on parameter tokens, embeddings and weight matrices; not on norms or biases
  double grad_clip = 1.0;     // 0 disables
  // The budget: exactly one of these is set.
  std::int64_t max_steps = 0;
  // The steps the warm-up + cosine schedule spans; 0: the run's total steps. A resumed run
  // whose budget grew keeps its schedule with this (`tfw train --resume --extend keep`):
  // past it the learning rate stays at min_lr_ratio × lr.
  std::int64_t schedule_steps = 0;
  double max_tokens = 0;
  double max_flops = 0;  // training FLOPs (docs/design/TOKENFORMER.md §5)
  std::int64_t eval_every = 100;
  std::int64_t eval_batches = 10;
  std::int64_t checkpoint_every = 500;
  std::int64_t keep_checkpoints = 3;       // the last K, plus the best by validation loss
  NanPolicy nan_policy = NanPolicy::stop;  // "stop" or "skip"
  std::int64_t log_every = 10;
  double peak_flops = 0;  // for MFU; 0: measured once per machine and cached
  // "fp32", or "bf16": bf16 autocast for the matmuls, fp32 master weights, optimiser state,
  // normalisations and loss (engine/config/precision.h, engine/machine/device.h). Evaluation follows it;
  // checkpoints stay fp32.
  Precision precision = Precision::fp32;
  // "cpu", "cuda" or "cuda:N" (engine/config/device_name.h): checked against this LibTorch and
  // machine when the config is read (device_problem), and again when training starts.
  DeviceName device;
  // float32 matrix products on CUDA in TF32 (cuBLAS and cuDNN): faster, with a 10-bit
  // mantissa. Off by default, so that fp32 means fp32; only for a CUDA device.
  bool tf32 = false;
  std::vector<GrowthEvent> growth;  // [[train.growth]], by step
  GrowthRepeat growth_repeat;       // [train.growth_repeat] (every_steps = 0: none)
  MaskConfig mask;                  // [train.mask] (no blocks used: no mask)
};

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
};

// The config as TOML, every table with its defaults filled in. It is derived from the typed
// fields, never kept beside them: the store, checkpoints and run_dir/config.toml hold this.
toml::table run_config_to_toml(const RunConfig& config);
std::string run_config_text(const RunConfig& config);  // run_config_to_toml as text
// A config's identity: the SHA-256 (hex) of its canonical text. Keys print sorted and values as
// TOML values, so two tables that are equal as TOML have one identity, whatever file layout,
// comments or key order they were written with.
std::string config_identity(const toml::table& table);
inline std::string config_identity(const RunConfig& config) { return config_identity(run_config_to_toml(config)); }

// Reads `path`, applies `--set` overrides and validates every key.
RunConfig run_config_load(const Registry& registry, const std::string& path,
                          const std::vector<std::string>& overrides = {});
RunConfig run_config_parse(const Registry& registry, const toml::table& table, const std::string& path);

// The model part only (params, flops, smoke); the other tables are validated all the same.
ModelConfig model_config_load(const Registry& registry, const std::string& path,
                              const std::vector<std::string>& overrides = {});
ModelConfig model_config_parse(const Registry& registry, const toml::table& table, const std::string& path);

}  // namespace tfw
