// Checkpoints: model, optimiser, counters, RNG states, data cursor and the resolved config,
// in one LibTorch archive `step-XXXXXXXX.pt`, written atomically (temp file, fsync, rename).
// Beside it a manifest `step-XXXXXXXX.toml` holds the format version, size and CRC-32 of the
// archive; it is written last, so a checkpoint without a manifest is incomplete and ignored.
// Loading checks size and checksum first: a truncated or corrupt file is a clear error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "engine/checkpoint_meta.h"
#include "engine/model.h"

namespace tfw {

// Writes <dir>/step-XXXXXXXX.{pt,toml}; returns the archive's path, size and checksum.
CheckpointInfo checkpoint_save(const std::string& dir, Model& model, torch::optim::Optimizer* optimizer,
                            const CheckpointMeta& meta);

// Loads weights (and optimiser state when given) into a model built from the checkpoint's
// config. Verifies first; a shape mismatch is a UsageError.
CheckpointMeta checkpoint_load(const std::string& path, Model& model, torch::optim::Optimizer* optimizer);

// Deletes all but the last `keep` checkpoints and the one with the best val_loss; returns
// the archives it deleted.
std::vector<std::string> checkpoint_prune(const std::string& dir, std::int64_t keep);

}  // namespace tfw
