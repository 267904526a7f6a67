// See grow_offline.h.
#include "engine/commands/grow_offline.h"

#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/data/shards.h"
#include "engine/core/error.h"
#include "engine/machine/memory_check.h"
#include "engine/nn/growth.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "engine/train/window_loss.h"
#include "engine/config/schedule.h"

namespace tfw {

GrowResult grow_checkpoint(const Registry& registry, const GrowRequest& request) {
  CheckpointMeta source_meta = checkpoint_read_meta(request.from_checkpoint);
  RunConfig source = checkpoint_run_config(registry, source_meta, request.from_checkpoint);
  RunConfig target = run_config_load(registry, request.to_config, request.to_overrides);
  const GrowthMethod& method = registry.growth_method(request.method);
  if (!method.grows(source.model.family)) {
    throw UsageError(with_hint(fmt::format("{} grows {} models; the checkpoint holds a {}", method.name(),
                                           method.family(), source.model.family),
                               fmt::format("methods for {}: {}", source.model.family,
                                           fmt::join(registry.family(source.model.family).growth_methods(), ", "))));
  }
  GrowResult result;
  result.plan = method.plan(*source.model.spec, *target.model.spec, request.options);
  // The grown model as the method leaves it (msg adds its mask ramp, starting at step 0).
  target.model.spec = growth_grown_spec(registry.family(target.model.family), method, *source.model.spec,
                                        *target.model.spec, request.options, 0);
  result.parameters_before = source.model.spec->parameter_count();
  result.parameters_after = target.model.spec->parameter_count();

  const ModelFamily& family = registry.family(source.model.family);
  std::shared_ptr<Model> small = family.build(*source.model.spec, 0);
  checkpoint_load(request.from_checkpoint, *small, nullptr);
  // Grow a second copy: in-place methods change the model they are given.
  std::shared_ptr<Model> working = family.build(*source.model.spec, 0);
  checkpoint_load(request.from_checkpoint, *working, nullptr);
  std::shared_ptr<Model> grown =
      method.apply(*working, family, *source.model.spec, *target.model.spec, request.options, request.seed);

  if (request.check) {
    const std::string shard_dir = data_ensure_prepared(target.data.corpus, target.data.tokenizer,
                                                       home_data_dir(home_resolve(request.home)), PrepareOptions());
    ShardMeta shards = shard_meta_read(shard_dir);
    TokenShard val(shard_dir + "/val.bin", shards.dtype);
    const TrainPlan plan = train_plan(target);
    // The windows of batches × train.batch_size, a micro-batch at a time with "auto".
    const std::int64_t B = forward_batch(target, 0), T = plan.seq_len, V = target.model.spec->shape().vocab;
    torch::NoGradGuard no_grad;
    const std::int64_t batches =
        (request.check_batches > 0 ? request.check_batches : target.train.eval_batches) * (target.train.batch_size / B);
    double before = 0, after = 0, diff = 0;
    for (std::int64_t k = 0; k < batches; ++k) {
      torch::Tensor batch = validation_batch(val, B, T, batches, k);
      torch::Tensor inputs = batch.narrow(1, 0, T), targets = batch.narrow(1, 1, T).reshape({-1});
      torch::Tensor a = small->forward(inputs), b = grown->forward(inputs);  // (B, T, V)
      diff = std::max(diff, (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>());
      before += torch::nn::functional::cross_entropy(a.reshape({-1, V}), targets).item<double>();
      after += torch::nn::functional::cross_entropy(b.reshape({-1, V}), targets).item<double>();
    }
    result.checked = true;
    result.max_abs_logit_diff = diff;
    result.loss_before = before / static_cast<double>(batches);
    result.loss_after = after / static_cast<double>(batches);
  }

  CheckpointMeta meta;
  meta.val_loss = result.checked ? result.loss_after : std::nan("");
  meta.best_val_loss = meta.val_loss;
  std::ostringstream options_text;
  options_text << request.options;
  meta.config_toml = run_config_text(target);
  meta.inherited_flops = source_meta.inherited_flops + source_meta.flops;
  meta.parent_run = request.parent_run;
  meta.parent_checkpoint = std::filesystem::absolute(request.from_checkpoint).string();
  meta.growth_method = method.name();
  meta.growth_options = options_text.str();
  result.inherited_flops = meta.inherited_flops;
  result.checkpoint = checkpoint_save(request.out_dir, *grown, nullptr, meta).path;
  return result;
}

}  // namespace tfw
