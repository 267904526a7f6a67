// Measured forward time of a model at a sequence length (E2: FLOPs against length, the
// formula beside a measurement). Torch-free header.
#pragma once

#include <cstdint>

#include "engine/config/run_config.h"

namespace tfw {

struct ForwardTiming {
  std::int64_t seq_len = 0;
  double seconds_per_token = 0;  // median of the repeats
  double flops_per_second = 0;   // formula forward FLOPs per token / seconds per token
};

// Builds the model (random weights) and times no-grad forward passes of `batch` sequences
// of `seq_len` tokens; the median of `repeats` after one warm-up.
ForwardTiming forward_timing(const Registry& registry, const ModelConfig& config, std::int64_t seq_len,
                             std::int64_t batch = 1, int repeats = 3);

}  // namespace tfw
