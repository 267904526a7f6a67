// Checkpoints: model, optimiser, counters, RNG states, data cursor and the resolved config,
// in one safetensors file `step-XXXXXXXX.safetensors` (format version 2), written atomically
// (temp file, fsync, rename). A checkpoint is plain data: it is read by our own bounded
// parser (engine/checkpoint/safetensors.h) and nothing in it can run. Its tensors are
//   model.NAME                              every parameter and buffer, as the model names them
//   optimizer.state.NAME.{step,exp_avg,exp_avg_sq[,max_exp_avg_sq]}   AdamW's state per parameter
//   rng.torch_cpu                           torch's CPU generator state
// and its `__metadata__` holds "format" = "tfw-checkpoint", "format_version", the counters
// (step, tokens, examples, flops, losses, wall_seconds, as decimal text in the shortest form
// that reads back bit-exact), sampler_state, config_toml, lineage, and "optimizer": the
// parameter groups (names and AdamW options) as JSON. docs/store.md describes it for users.
// Beside it a manifest `step-XXXXXXXX.toml` holds the format version, size and CRC-32 of the
// archive; it is written last, so a checkpoint without a manifest is incomplete and ignored.
// Loading checks size and checksum first: a truncated or corrupt file is a clear error.
// Version 1 (a LibTorch archive `step-XXXXXXXX.pt`) is not loaded: checkpoint_upgrade.h.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/error.h"
#include "engine/nn/model.h"

namespace tfw {

// Writes <dir>/step-XXXXXXXX.{pt,toml}; returns the archive's path, size and checksum.
CheckpointInfo checkpoint_save(const std::string& dir, Model& model, torch::optim::Optimizer* optimizer,
                               const CheckpointMeta& meta);

// Loads weights (and optimiser state when given) into a model built from the checkpoint's
// config, and sets torch's CPU generator. Verifies first; a missing or extra tensor, or a
// dtype or shape mismatch, is a UsageError.
CheckpointMeta checkpoint_load(const std::string& path, Model& model, torch::optim::Optimizer* optimizer);

// A file's tensors that do not fit a model: a missing, extra or misshapen tensor, or one of
// another dtype. what() is the whole message, with the checkpoint's hint; problem() names the
// tensor and what differs alone ("embedding has shape [3, 3] in the file, [256, 64] in the
// model"), for a caller whose file is not a checkpoint (a growth script's output).
class TensorMismatch : public UsageError {
 public:
  TensorMismatch(const std::string& what, std::string problem) : UsageError(what), problem_(std::move(problem)) {}
  const std::string& problem() const { return problem_; }

 private:
  std::string problem_;
};

// A tensor dtype as safetensors names it ("F32"); Error for one a checkpoint cannot store.
const char* checkpoint_dtype_name(torch::ScalarType type);

// Every tensor a checkpoint stores of `model`: its parameters, then its buffers, by name.
std::vector<std::pair<std::string, torch::Tensor>> checkpoint_model_tensors(Model& model);

// The model's tensors alone (parameters and buffers under the model's own names: no "model."
// prefix, no optimiser, no generator state) as a safetensors file at `path`, written
// atomically, with `metadata` as its `__metadata__`: `tfw export-model`'s model.safetensors.
void model_weights_save(const std::string& path, Model& model, const std::map<std::string, std::string>& metadata);

// Reads such a file into `model`, by our own bounded parser: every tensor the model has, with
// its dtype and shape, and nothing else (else UsageError naming the tensor). Returns the file's
// metadata.
std::map<std::string, std::string> model_weights_load(const std::string& path, Model& model);

}  // namespace tfw
