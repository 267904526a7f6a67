// The memory check: what a training needs against what the machine (or its GPU) has, asked
// before any compute, by the trainer, the batch runner and the service's submissions; and,
// for train.grad_accum = "auto", the micro-batch that fits.
#pragma once

#include <cstdint>
#include <string>

#include "engine/config/run_config.h"
#include "engine/config/schedule.h"

namespace tfw {

// An estimate of the memory training needs with micro-batches of `micro_batch` sequences, in
// bytes: weights, gradients and AdamW's two moments in fp32 (16 bytes a parameter), plus the
// activations one micro-batch keeps for the backward pass, from the model's shape and FLOPs,
// in floats (4 bytes; bf16 keeps many at 2, so this errs high) per token and layer:
//   - the projection outputs, N / (L·d) (N: the parameters a token multiplies by), and 16·d
//     for norms and residuals;
//   - attention: on the CPU, and with every kernel but CUDA's fused one, 2·heads·T (the
//     softmax's probabilities and their gradient); on CUDA, where attention is
//     scaled_dot_product_attention's fused kernel, 2·heads (a log-sum-exp a row);
// and, for a language model, its logits: 2·vocab a token with the plain loss; with the
// chunked loss (engine/config/loss_chunks.h) 2·d a token (the hidden state and its gradient)
// and 3·kChunkRows·vocab once (a block's logits, their softmax and a bf16 copy). A language
// model's validation, which keeps no activations but builds the full logits, needs 18 bytes a
// parameter and 12 a token and vocabulary entry; the estimate is the larger of the two.
// Coarse by design: it tells 10 GB from 10 TB, and errs high rather than low.
double train_memory_bytes(const RunConfig& config, const TrainPlan& plan, std::int64_t micro_batch);
// The same with train.batch_size sequences a micro-batch (as configured, before any "auto").
double train_memory_bytes(const RunConfig& config, const TrainPlan& plan);

// The memory there is for a training: on a GPU (train.device = "cuda[:N]") what the device has
// free now (cudaMemGetInfo), else the machine's physical memory; at most train.memory_limit_gb.
struct MemoryAvailable {
  double bytes = 0;   // 0: unknown (nothing is checked)
  std::string where;  // "GPU cuda:0 has 79.2 GB free of 85 GB", for messages
};
MemoryAvailable train_memory_available(const RunConfig& config);

// train.grad_accum = "auto" plans micro-batches within this share of the memory there is: the
// rest is for the allocator's fragmentation and the libraries' workspaces.
constexpr double kAutoMemoryShare = 0.9;

// How a step's batch is split: `accum` micro-batches of `size` sequences.
struct MicroBatch {
  std::int64_t size = 0, accum = 1;
  double need_bytes = 0;  // train_memory_bytes at that size
};

// The fewest micro-batches (a divisor of train.batch_size, each a multiple of `world` ranks'
// sequences) whose estimate fits within kAutoMemoryShare of `have_bytes`; have_bytes <= 0 (not
// known): the whole batch at once. UsageError, naming the estimate of the smallest split and
// the memory there is, when none fits.
MicroBatch micro_batch_choose(const RunConfig& config, const TrainPlan& plan, double have_bytes,
                              const std::string& where, std::int64_t world = 1);

// train.grad_accum = "auto" chooses one process's micro-batch from the memory it finds free,
// and ranks could choose differently: UsageError for "auto" in a data-parallel run (`ranks`).
void refuse_auto_split_with_ranks(const RunConfig& config, bool ranks);

// The sequences a pass that only reads the model takes at once (tfw eval, tfw grow --check):
// train.batch_size, or with train.grad_accum = "auto" the micro-batch the run trained with
// (`kept`, a checkpoint's micro_batch, when it divides the batch), else micro_batch_choose's
// for the memory there is.
std::int64_t forward_batch(const RunConfig& config, std::int64_t kept);

// Throws UsageError, with the estimate and the memory there is, when the estimate exceeds the
// memory there is (train_memory_available): an absurd model fails at once instead of in the
// allocator. With train.grad_accum = "auto", when even the smallest micro-batch does not fit.
void train_memory_check(const RunConfig& config, const TrainPlan& plan);

}  // namespace tfw
