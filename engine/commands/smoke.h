// A short forward/backward smoke of a model config: build it, take a few AdamW steps on
// one fixed random batch, report the losses. Used by `tfw smoke` and the quickstart.
// Torch-free header so that the CLI does not compile torch.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/config/run_config.h"

namespace tfw {

struct SmokeOptions {
  std::int64_t steps = 5;
  std::int64_t batch = 2;
  std::int64_t seq_len = 64;
  double lr = 1e-3;
  std::uint64_t seed = 0;
};

struct SmokeResult {
  std::int64_t parameters = 0;  // counted on the built model
  std::vector<double> losses;   // one per step, before that step's update
  double seconds = 0;           // wall time of all steps
  double tokens_per_second = 0;
};

SmokeResult model_smoke(const Registry& registry, const ModelConfig& config, const SmokeOptions& options);

}  // namespace tfw
