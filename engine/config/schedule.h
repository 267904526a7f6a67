// The training plan and learning-rate schedule: tokens and FLOPs per optimiser step, the
// number of steps a budget (steps, tokens or training FLOPs) buys, and linear warm-up then
// cosine decay to min_lr_ratio × lr. Torch-free, so tests and planners use it directly.
#pragma once

#include <cstdint>

#include "engine/config/run_config.h"

namespace tfw {

struct TrainPlan {
  std::int64_t seq_len = 0;            // T
  std::int64_t examples_per_step = 0;  // batch_size · grad_accum (token windows, images)
  std::int64_t tokens_per_step = 0;    // examples_per_step · T
  double flops_per_step = 0;           // training FLOPs (3 × forward, docs/design/TOKENFORMER.md §5):
                                       // examples_per_step × FlopsPerToken::training_per_example
  std::int64_t total_steps = 0;
  std::int64_t schedule_steps = 0;  // the steps the lr schedule spans (train.schedule_steps, else total_steps)
  std::int64_t warmup_steps = 0;
};

// Throws UsageError when no budget is set or T exceeds the model's context.
TrainPlan train_plan(const RunConfig& config);

// The tokens of an example: a language model's training window (train.seq_len, else the
// model's context); an image classifier's tokens per image. Needs no budget (evaluation of a
// checkpoint that has none, an imported one, uses it too).
std::int64_t train_seq_len(const RunConfig& config);

// Learning rate for the update of step `step` (0-based): (step + 1) / warmup × lr during
// warm-up, then cosine from lr to min_lr_ratio × lr at the last step.
double lr_at(const TrainConfig& train, const TrainPlan& plan, std::int64_t step);

}  // namespace tfw
