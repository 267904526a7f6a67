// Offline growth (`tfw grow`): load a checkpoint, grow its model with a growth method to the
// model of a target config, write the grown model as a new checkpoint whose lineage (parent
// run, method, options, inherited FLOPs) a run started from it records; optionally measure
// the largest logit difference between the small and the grown model on validation text.
// Torch-free header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plugin/plugin_api.h"
#include "engine/config/run_config.h"

namespace tfw {

struct GrowRequest {
  std::string method;
  std::string from_checkpoint;
  std::string to_config;                  // a run config file: its [model] is the target, its [data] the check text
  std::vector<std::string> to_overrides;  // --set for the target config
  toml::table options;                    // the method's options
  std::string out_dir;
  std::uint64_t seed = 0;
  bool check = false;              // measure logits and losses before and after on validation windows
  std::int64_t check_batches = 0;  // 0: the target's train.eval_batches (the trainer's windows)
  std::string home;                // TFW_HOME, for the validation data
  std::int64_t parent_run = 0;     // the store id of the run that wrote from_checkpoint (0: unknown)
};

struct GrowResult {
  std::string checkpoint;  // the grown checkpoint's path
  GrowthPlan plan;
  std::int64_t parameters_before = 0, parameters_after = 0;
  double inherited_flops = 0;  // the lineage's FLOPs carried by the grown checkpoint
  bool checked = false;
  double max_abs_logit_diff = 0, loss_before = 0, loss_after = 0;
};

GrowResult grow_checkpoint(const Registry& registry, const GrowRequest& request);

}  // namespace tfw
