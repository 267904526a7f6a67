#include "engine/config/schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/plugin/task.h"

namespace tfw {

std::int64_t train_seq_len(const RunConfig& config) {
  return config.train.seq_len > 0 ? config.train.seq_len : config.model.spec->shape().seq_len;
}

TrainPlan train_plan(const RunConfig& config) {
  const TrainConfig& train = config.train;
  const ModelShape shape = config.model.spec->shape();
  TrainPlan plan;
  plan.seq_len = train_seq_len(config);
  if (plan.seq_len > shape.seq_len) {
    throw UsageError(
        with_hint(fmt::format("train.seq_len = {} exceeds the model's seq_len = {}", plan.seq_len, shape.seq_len),
                  "lower train.seq_len or raise model.seq_len"));
  }
  if (config.data.task == Task::image_classification && train.seq_len > 0 && train.seq_len != shape.seq_len) {
    throw UsageError(with_hint(
        fmt::format("train.seq_len = {}: an image classifier reads {} tokens per image", train.seq_len, shape.seq_len),
        "leave train.seq_len out (0) for an image-classification run"));
  }
  plan.examples_per_step = train.batch_size * train.grad_accum;
  plan.tokens_per_step = plan.examples_per_step * plan.seq_len;
  plan.flops_per_step = static_cast<double>(config.model.spec->flops_per_token(plan.seq_len).training_per_example()) *
                        static_cast<double>(plan.examples_per_step);
  // A budget in tokens or FLOPs becomes steps through a double: one beyond 2^53 steps (1e30
  // tokens) overflowed the conversion and silently became a 1-step run.
  auto steps_of = [&](double budget, double per_step, const char* key, const char* unit) {
    const double steps = std::ceil(budget / per_step);
    if (!(steps <= 9007199254740992.0)) {
      throw UsageError(
          with_hint(fmt::format("train.{} = {:g} is {:.3g} steps of {:g} {}: more than tfw can count "
                                "(2^53)",
                                key, budget, steps, per_step, unit),
                    fmt::format("give a budget a run can reach, e.g. train.{} = {:g}", key, per_step * 1e6)));
    }
    return static_cast<std::int64_t>(steps);
  };
  if (train.max_steps > 0) {
    plan.total_steps = train.max_steps;
  } else if (train.max_tokens > 0) {
    plan.total_steps = steps_of(train.max_tokens, static_cast<double>(plan.tokens_per_step), "max_tokens", "tokens");
  } else if (train.max_flops > 0) {
    plan.total_steps = steps_of(train.max_flops, plan.flops_per_step, "max_flops", "FLOPs");
  } else {
    throw UsageError(with_hint(fmt::format("{}: no training budget is set", config.model.path),
                               "set one of train.max_steps, train.max_tokens or train.max_flops"));
  }
  plan.total_steps = std::max<std::int64_t>(plan.total_steps, 1);
  plan.schedule_steps = train.schedule_steps > 0 ? train.schedule_steps : plan.total_steps;
  plan.warmup_steps = train.warmup_steps >= 0
                          ? train.warmup_steps
                          : static_cast<std::int64_t>(std::round(train.warmup_fraction * plan.schedule_steps));
  return plan;
}

double lr_at(const TrainConfig& train, const TrainPlan& plan, std::int64_t step) {
  if (step < plan.warmup_steps) {
    return train.lr * static_cast<double>(step + 1) / static_cast<double>(plan.warmup_steps);
  }
  const std::int64_t decay_steps = plan.schedule_steps - plan.warmup_steps;
  if (decay_steps <= 1) return train.lr;
  const double progress =
      std::min(1.0, static_cast<double>(step - plan.warmup_steps) / static_cast<double>(decay_steps - 1));
  const double min_lr = train.min_lr_ratio * train.lr;
  return min_lr + 0.5 * (train.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace tfw
