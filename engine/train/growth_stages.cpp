// The growth schedule of a run. See growth_stages.h.
#include "engine/train/growth_stages.h"

#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "engine/core/config_table.h"
#include "engine/core/error.h"

namespace tfw {

namespace {

// Every growth event of the run: [[train.growth]] and the expansion of
// [train.growth_repeat], by step.
std::vector<GrowthEvent> growth_events(const RunConfig& config, std::int64_t total_steps) {
  std::vector<GrowthEvent> events = config.train.growth;
  const GrowthRepeat& repeat = config.train.growth_repeat;
  if (repeat.every_steps > 0) {
    const std::int64_t stop = repeat.stop_step > 0 ? repeat.stop_step : total_steps - 1;
    for (std::int64_t step = std::max<std::int64_t>(repeat.start_step, 1); step <= stop; step += repeat.every_steps) {
      for (const GrowthEvent& e : config.train.growth) {
        if (e.at_step == step) {
          throw UsageError(fmt::format("train.growth and train.growth_repeat both grow at step {}", step));
        }
      }
      events.push_back({step, repeat.method, toml::table{}, repeat.add_attn, repeat.add_ffn, repeat.options});
    }
  }
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.at_step < b.at_step; });
  return events;
}

// The growth method plugin has checked these options' values (plugins/pattention_grow).
bool restarts_schedule(const toml::table& options) {
  return options["lr_schedule"].value_or(std::string("continue")) == "restart";
}

// An event the run never reaches was silently ignored.
void check_reached(const RunConfig& config, std::int64_t total_steps) {
  for (const GrowthEvent& event : config.train.growth) {
    if (event.at_step < total_steps) continue;
    throw UsageError(with_hint(fmt::format("train.growth at_step = {} is not before the run's last step: the run "
                                           "trains {} steps (0 to {}), so it would never grow",
                                           event.at_step, total_steps, total_steps - 1),
                               "lower at_step, or raise the budget (train.max_steps, train.max_tokens)"));
  }
}

// The [model] table an event asks for: the current one with `to` and `add_*` applied.
toml::table target_of(const ModelSpec& current, const GrowthEvent& event) {
  toml::table target = current.to_toml();
  for (const auto& [key, value] : event.to) target.insert_or_assign(key, value);
  for (const auto& [key, add] :
       {std::pair<const char*, std::int64_t>{"n_attn", event.add_attn}, {"n_ffn", event.add_ffn}}) {
    if (add == 0) continue;
    auto base = target[key].value<std::int64_t>();
    if (!base) {
      throw UsageError(fmt::format("train.growth at step {}: add_{} needs a model with {}", event.at_step,
                                   key[2] == 'a' ? "attn" : "ffn", key));
    }
    target.insert_or_assign(key, *base + add);
  }
  return target;
}

}  // namespace

std::vector<GrowthStage> growth_stages(const Registry& registry, const RunConfig& config, std::int64_t first_step,
                                       std::int64_t total_steps) {
  check_reached(config, total_steps);
  const ModelFamily& family = registry.family(config.model.family);
  std::shared_ptr<const ModelSpec> current = config.model.spec;
  std::vector<GrowthStage> stages;
  for (const GrowthEvent& event : growth_events(config, total_steps)) {
    if (event.at_step < first_step || event.at_step >= total_steps) continue;
    GrowthStage stage;
    stage.event = event;
    stage.method = &registry.growth_method(event.method);
    stage.from = current;
    toml::table target = target_of(*current, event);
    ConfigTable view(target, fmt::format("train.growth(step {}).to", event.at_step));
    stage.to = family.parse(view);
    view.finish();
    stage.plan = stage.method->plan(*stage.from, *stage.to, event.options);
    stage.to = growth_grown_spec(family, *stage.method, *stage.from, *stage.to, event.options, event.at_step);
    stage.restarts_schedule = restarts_schedule(event.options);
    stage.extends_optimizer =
        stage.method->in_place() && event.options["optimizer"].value_or(std::string("extend")) == "extend";
    current = stage.to;
    stages.push_back(std::move(stage));
  }
  return stages;
}

std::int64_t growth_restart_step(const RunConfig& config, std::int64_t step, std::int64_t total_steps) {
  std::int64_t restart = 0;
  for (const GrowthEvent& e : growth_events(config, total_steps)) {
    if (e.at_step <= step && restarts_schedule(e.options)) restart = e.at_step;
  }
  return restart;
}

double growth_lr(const TrainConfig& train, const TrainPlan& plan, std::int64_t step, std::int64_t restart_step) {
  if (restart_step == 0) return lr_at(train, plan, step);
  TrainPlan stage = plan;
  stage.total_steps = plan.total_steps - restart_step;
  stage.schedule_steps = plan.schedule_steps - restart_step;
  return lr_at(train, stage, step - restart_step);
}

}  // namespace tfw
