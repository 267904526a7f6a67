// Loss of a language model on token windows: the training loss of a batch and the mean
// validation loss over fixed windows spread evenly over a shard (the same windows every
// time, so evaluations before and after a growth compare like with like).
// Shapes: B batch, T sequence length, V vocabulary.
#pragma once

#include "engine/nn/libtorch.h"

#include "engine/data/shards.h"
#include "engine/machine/device.h"
#include "engine/dist/distributed.h"
#include "engine/nn/model.h"

namespace tfw {

// batch (B, T + 1): mean cross-entropy of predicting batch[:, 1:] from batch[:, :T], over the
// first V logits (the ids the data can hold; a padded vocabulary's others get no probability). The batch
// moves to the model's device; the forward pass runs in `precision` (engine/machine/device.h), the
// loss in at least float32.
torch::Tensor loss_of(Model& model, const torch::Tensor& batch, std::int64_t T, std::int64_t V,
                      Precision precision = Precision::fp32,
                      torch::nn::functional::CrossEntropyFuncOptions::reduction_t reduction = torch::kMean);

// The k-th of `batches` fixed validation batches (B, T + 1).
torch::Tensor validation_batch(const TokenShard& val, std::int64_t B, std::int64_t T, std::int64_t batches,
                               std::int64_t k);

// Mean loss over `batches` fixed validation batches. With a process group, rank r computes
// batches r, r + W, ... and the sum is all-reduced: every rank returns the same mean, over the
// same windows as one process.
double evaluate(Model& model, const TokenShard& val, std::int64_t B, std::int64_t T, std::int64_t V,
                std::int64_t batches, Precision precision = Precision::fp32, DistGroup* dist = nullptr);

}  // namespace tfw
