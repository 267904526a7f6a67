#include "engine/train/schedule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/error.h"

namespace tfw {

TrainPlan train_plan(const RunConfig& config) {
  const TrainConfig& train = config.train;
  const ModelShape shape = config.model.spec->shape();
  TrainPlan plan;
  plan.seq_len = train.seq_len > 0 ? train.seq_len : shape.seq_len;
  if (plan.seq_len > shape.seq_len) {
    throw UsageError(with_hint(fmt::format("train.seq_len = {} exceeds the model's seq_len = {}", plan.seq_len,
                                           shape.seq_len),
                               "lower train.seq_len or raise model.seq_len"));
  }
  plan.tokens_per_step = train.batch_size * train.grad_accum * plan.seq_len;
  plan.flops_per_step = static_cast<double>(config.model.spec->flops_per_token(plan.seq_len).training()) *
                        static_cast<double>(plan.tokens_per_step);
  if (train.max_steps > 0) {
    plan.total_steps = train.max_steps;
  } else if (train.max_tokens > 0) {
    plan.total_steps = static_cast<std::int64_t>(std::ceil(train.max_tokens / plan.tokens_per_step));
  } else if (train.max_flops > 0) {
    plan.total_steps = static_cast<std::int64_t>(std::ceil(train.max_flops / plan.flops_per_step));
  } else {
    throw UsageError(with_hint("no training budget is set",
                               "set one of train.max_steps, train.max_tokens or train.max_flops"));
  }
  plan.total_steps = std::max<std::int64_t>(plan.total_steps, 1);
  plan.warmup_steps = train.warmup_steps >= 0
                          ? train.warmup_steps
                          : static_cast<std::int64_t>(std::round(train.warmup_fraction * plan.total_steps));
  return plan;
}

double lr_at(const TrainConfig& train, const TrainPlan& plan, std::int64_t step) {
  if (step < plan.warmup_steps) {
    return train.lr * static_cast<double>(step + 1) / static_cast<double>(plan.warmup_steps);
  }
  const std::int64_t decay_steps = plan.total_steps - plan.warmup_steps;
  if (decay_steps <= 1) return train.lr;
  const double progress = std::min(1.0, static_cast<double>(step - plan.warmup_steps) /
                                            static_cast<double>(decay_steps - 1));
  const double min_lr = train.min_lr_ratio * train.lr;
  return min_lr + 0.5 * (train.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace tfw
