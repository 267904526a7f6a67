// The growth schedule of a run, resolved before its first step: every [[train.growth]] event
// and the expansion of [train.growth_repeat], each checked against the model the events before
// it produce, so that a bad target or an impossible growth is an error before any training.
// Also the learning rate with the schedule restarted at a growth (lr_schedule = "restart").
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <toml++/toml.h>

#include "engine/nn/growth.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/config/schedule.h"

namespace tfw {

// One growth event, resolved against the model it will grow.
struct GrowthStage {
  GrowthEvent event;
  const GrowthMethod* method = nullptr;
  std::shared_ptr<const ModelSpec> from, to;
  GrowthPlan plan;
  bool restarts_schedule = false;  // options.lr_schedule = "restart"
  bool extends_optimizer = false;  // an in-place method with options.optimizer = "extend"
};

// Every event from `first_step` on, in step order. A UsageError names an event the run never
// reaches, a clash of [[train.growth]] with [train.growth_repeat], or a target the family or
// the method refuses.
std::vector<GrowthStage> growth_stages(const Registry& registry, const RunConfig& config, std::int64_t first_step,
                                       std::int64_t total_steps);

// The step of the last schedule restart at or before `step` (0: none).
std::int64_t growth_restart_step(const RunConfig& config, std::int64_t step, std::int64_t total_steps);

// The learning rate at `step` with the schedule restarted at `restart_step` (0: never).
double growth_lr(const TrainConfig& train, const TrainPlan& plan, std::int64_t step, std::int64_t restart_step);

}  // namespace tfw
