// The task's side of training (engine/plugin/task.h): where the examples come from, how a batch
// is drawn, the loss, and the validation metrics. The trainer holds one TaskData and
// never asks which task it is. Shapes: B batch, T tokens per example.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/machine/device.h"
#include "engine/dist/distributed.h"
#include "engine/nn/model.h"
#include "engine/config/run_config.h"
#include "engine/plugin/task.h"

namespace tfw {

// A batch on the CPU: a language model's input is ids (B, T) and its target ids (B, T); an
// image classifier's input is images (B, C, H, W) float and its target labels (B) int64.
struct Batch {
  torch::Tensor input, target;
};

class TaskData {
 public:
  virtual ~TaskData() = default;
  // Tokens the model reads per example (a window's T; an image's patch and class tokens).
  virtual std::int64_t tokens_per_example() const = 0;
  // Draws the next global batch of B examples and keeps rows [first, first + count): a
  // data-parallel rank draws every example's random numbers, so every rank's generator stays
  // in the same state and the state in a checkpoint fits any world size.
  virtual Batch next(std::int64_t B, std::int64_t first, std::int64_t count) = 0;
  virtual std::string sampler_state() const = 0;
  virtual void sampler_restore(const std::string& state) = 0;  // UsageError when corrupt
  // The mean loss of a batch (moved to the model's device; forward in `precision`, loss in at
  // least float32).
  virtual torch::Tensor loss(Model& model, const Batch& batch, Precision precision) = 0;
  // The validation loss over `batches` fixed validation batches (the same ones every time;
  // before and after a growth compare like with like). With a process group, every rank
  // returns the mean over the same batches as one process.
  virtual double validation_loss(Model& model, std::int64_t batches, Precision precision, DistGroup* dist) = 0;
  // Every validation metric, the loss first (the same value validation_loss returns).
  virtual std::vector<Metric> validate(Model& model, std::int64_t batches, Precision precision, DistGroup* dist) = 0;
};

// Random inputs and targets for `model` (smoke tests): ids (B, T) and targets (B, T) in
// [0, V) for a language model; N(0, 1) images (B, C, S, S) and labels in [0, K) for an image
// classifier (T is then its own).
Batch random_batch(Model& model, const ModelShape& shape, std::int64_t B, std::int64_t T);

// The mean cross-entropy of a batch's logits against its targets, for either task (logits
// (B, T, V) or (B, K)), on the model's device, in float32 or wider.
// A language model's targets lie in [0, valid) (the data's vocabulary; 0: the model's): the
// logits past it, a padded vocabulary's, get no probability. Its loss is chunked
// (engine/train/lm_loss.h) when the micro-batch's fp32 logits would pass 256 MiB.
torch::Tensor batch_loss(Model& model, const Batch& batch, Precision precision = Precision::fp32,
                         std::int64_t valid = 0);

// Opens the run's data (preparing token shards when needed, in TFW_HOME/data), for batches of
// `batch_size` examples of `seq_len` tokens (a language model's window). Throws UsageError
// for data that does not fit the model (a vocabulary larger than model.vocab, images of
// another size, more classes than the head has).
std::unique_ptr<TaskData> task_data_open(const RunConfig& config, const std::string& home, std::int64_t batch_size,
                                         std::int64_t seq_len, std::uint64_t seed,
                                         const std::function<void(const std::string&)>& say = {});

}  // namespace tfw
