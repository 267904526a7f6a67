#include "engine/train/schedule.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "engine/kernels/cuda/cuda_info.h"
#include "engine/core/error.h"
#include "engine/task.h"

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
    throw UsageError(with_hint(fmt::format("train.seq_len = {} exceeds the model's seq_len = {}", plan.seq_len,
                                           shape.seq_len),
                               "lower train.seq_len or raise model.seq_len"));
  }
  if (config.data.task == Task::image_classification && train.seq_len > 0 && train.seq_len != shape.seq_len) {
    throw UsageError(with_hint(fmt::format("train.seq_len = {}: an image classifier reads {} tokens per image", train.seq_len,
                                           shape.seq_len),
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
      throw UsageError(with_hint(fmt::format("train.{} = {:g} is {:.3g} steps of {:g} {}: more than tfw can count "
                                             "(2^53)", key, budget, steps, per_step, unit),
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
  const double progress = std::min(1.0, static_cast<double>(step - plan.warmup_steps) /
                                            static_cast<double>(decay_steps - 1));
  const double min_lr = train.min_lr_ratio * train.lr;
  return min_lr + 0.5 * (train.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double train_memory_bytes(const RunConfig& config, const TrainPlan& plan) {
  const ModelSpec& spec = *config.model.spec;
  const ModelShape shape = spec.shape();
  const double parameters = static_cast<double>(spec.parameter_count());
  const double layers = static_cast<double>(shape.layers), d = static_cast<double>(shape.d);
  const double T = static_cast<double>(plan.seq_len);
  const double N = static_cast<double>(spec.flops_per_token(plan.seq_len).token_parameter) / 2;
  const double per_token = layers * (N / std::max(1.0, layers * d) + 16 * d + 2 * static_cast<double>(shape.heads) * T) +
                           2 * static_cast<double>(shape.vocab);
  const double tokens = static_cast<double>(config.train.batch_size) * T;
  return 16 * parameters + 4 * per_token * tokens;
}

void train_memory_check(const RunConfig& config, const TrainPlan& plan) {
  const double need = train_memory_bytes(config, plan);
  // On a GPU the memory that counts is what the device has free now (other processes and
  // this one's earlier allocations taken off); on the CPU the machine's physical memory.
  const DeviceName& device = config.train.device;
  double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  std::string where = fmt::format("this machine has {:.3g} GB", have / 1e9);
  if (device.is_cuda()) {
    const int index = std::max(device.index, 0);  // "cuda" or "cuda:N"
    if (const std::optional<CudaMemory> memory = cuda_memory(index)) {
      have = static_cast<double>(memory->free_bytes);
      where = fmt::format("GPU cuda:{} has {:.3g} GB free of {:.3g} GB", index, have / 1e9,
                          static_cast<double>(memory->total_bytes) / 1e9);
    }
  }
  if (have > 0 && need > have) {
    throw UsageError(with_hint(fmt::format("{} needs about {:.3g} GB of memory to train (model {}, batch {} x {} "
                                           "tokens); {}",
                                           config.model.name, need / 1e9, config.model.spec->summary(), config.train.batch_size,
                                           plan.seq_len, where),
                               "use a smaller model or train.batch_size (with train.grad_accum for the same batch)"));
  }
}

}  // namespace tfw
