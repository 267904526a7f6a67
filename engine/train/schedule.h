// The training plan and learning-rate schedule: tokens and FLOPs per optimiser step, the
// number of steps a budget (steps, tokens or training FLOPs) buys, and linear warm-up then
// cosine decay to min_lr_ratio × lr. Torch-free, so tests and planners use it directly.
#pragma once

#include <cstdint>

#include "engine/run_config.h"

namespace tfw {

struct TrainPlan {
  std::int64_t seq_len = 0;          // T
  std::int64_t tokens_per_step = 0;  // batch_size · grad_accum · T
  double flops_per_step = 0;         // training FLOPs (3 × forward, TOKENFORMER.md §5)
  std::int64_t total_steps = 0;
  std::int64_t warmup_steps = 0;
};

// Throws UsageError when no budget is set or T exceeds the model's context.
TrainPlan train_plan(const RunConfig& config);

// Learning rate for the update of step `step` (0-based): (step + 1) / warmup × lr during
// warm-up, then cosine from lr to min_lr_ratio × lr at the last step.
double lr_at(const TrainConfig& train, const TrainPlan& plan, std::int64_t step);

}  // namespace tfw
