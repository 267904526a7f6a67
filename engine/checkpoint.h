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

#include "engine/model.h"

namespace tfw {

inline constexpr std::int64_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  std::int64_t format_version = kCheckpointFormatVersion;
  std::int64_t step = 0;          // optimiser steps done
  std::int64_t tokens = 0;        // training tokens seen
  double flops = 0;               // training FLOPs spent by this run
  double train_loss = 0;          // of the last step
  double val_loss = 0;            // of the last evaluation (NaN if none)
  double best_val_loss = 0;
  double wall_seconds = 0;        // training time so far
  std::string sampler_state;      // the batch sampler's RNG (the data cursor)
  std::string config_toml;        // the resolved run config
};


struct CheckpointInfo {
  std::string path;     // the .pt archive
  std::int64_t step = 0;
  double val_loss = 0;  // NaN if none
  std::uint64_t size = 0;
  std::uint32_t crc32 = 0;
};

// Writes <dir>/step-XXXXXXXX.{pt,toml}; returns the archive's path, size and checksum.
CheckpointInfo checkpoint_save(const std::string& dir, LanguageModel& model, torch::optim::Optimizer* optimizer,
                            const CheckpointMeta& meta);

// Complete checkpoints (manifest present) in `dir`, by step.
std::vector<CheckpointInfo> checkpoint_list(const std::string& dir);

// Checks size and CRC-32 against the manifest; throws UsageError naming the problem.
void checkpoint_verify(const std::string& path);

// Reads only the metadata (verifies first).
CheckpointMeta checkpoint_read_meta(const std::string& path);

// Loads weights (and optimiser state when given) into a model built from the checkpoint's
// config. Verifies first; a shape mismatch is a UsageError.
CheckpointMeta checkpoint_load(const std::string& path, LanguageModel& model, torch::optim::Optimizer* optimizer);

// Deletes all but the last `keep` checkpoints and the one with the best val_loss; returns
// the archives it deleted.
std::vector<std::string> checkpoint_prune(const std::string& dir, std::int64_t keep);

}  // namespace tfw
