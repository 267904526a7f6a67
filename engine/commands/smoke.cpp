// See smoke.h.
#include "engine/commands/smoke.h"

#include <chrono>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/model.h"
#include "engine/plugin/registry.h"
#include "engine/train/task_data.h"

namespace tfw {

SmokeResult model_smoke(const Registry& registry, const ModelConfig& config, const SmokeOptions& options) {
  if (options.steps <= 0 || options.batch <= 0 || options.seq_len <= 0) {
    throw UsageError("smoke needs positive steps, batch and seq_len");
  }
  std::shared_ptr<Model> model = registry.family(config.family).build(*config.spec, options.seed);
  SmokeResult result;
  for (const torch::Tensor& p : model->parameters()) result.parameters += p.numel();

  // Random token windows, or random images for an image classifier (whose tokens per image
  // are its own: --seq-len does not apply).
  const ModelShape shape = config.spec->shape();
  const Batch batch = random_batch(*model, shape, options.batch, options.seq_len);
  const std::int64_t tokens = batch.input.dim() == 2 ? options.seq_len : shape.seq_len;
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(options.lr).weight_decay(0.0));

  auto start = std::chrono::steady_clock::now();
  for (std::int64_t step = 0; step < options.steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = batch_loss(*model, batch);
    loss.backward();
    optimizer.step();
    double value = loss.item<double>();
    if (!std::isfinite(value)) {
      throw Error(with_hint(fmt::format("smoke of '{}': loss is {} at step {}", config.name, value, step),
                            "lower the learning rate or check the config's init values"));
    }
    result.losses.push_back(value);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.tokens_per_second = static_cast<double>(options.steps * options.batch * tokens) / result.seconds;
  return result;
}

}  // namespace tfw
