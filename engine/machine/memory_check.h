// The memory check: what a training needs against what the machine (or its GPU) has, asked
// before any compute, by the trainer, the batch runner and the service's submissions.
#pragma once

#include "engine/config/run_config.h"
#include "engine/config/schedule.h"

namespace tfw {

// An estimate of the memory training needs, in bytes: weights, gradients and AdamW's two
// moments in fp32 (16 bytes a parameter), plus the activations one micro-batch keeps for the
// backward pass, from the model's shape and FLOPs (floats per token per layer: the
// projection outputs N / (L·d), 16·d for norms and residuals, 2·heads·T attention weights;
// plus 2·vocab logits per token). Coarse by design: it tells 10 GB from 10 TB.
double train_memory_bytes(const RunConfig& config, const TrainPlan& plan);

// Throws UsageError, with the estimate and the memory there is, when the estimate exceeds
// the machine's physical memory, or on a GPU (train.device = "cuda[:N]") the memory that
// device has free (cudaMemGetInfo): an absurd model fails at once instead of in the allocator.
void train_memory_check(const RunConfig& config, const TrainPlan& plan);

}  // namespace tfw
