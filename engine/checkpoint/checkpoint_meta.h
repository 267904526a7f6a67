// Checkpoint metadata, listing, verification and pruning: torch-free (libtfw_core), so the CLI and the store
// plumbing can read checkpoints' metadata without compiling torch. Saving and loading
// weights is engine/checkpoint/checkpoint.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tfw {

class Registry;
struct RunConfig;

// 2: safetensors (`step-N.safetensors`), plain data read by our own bounded parser.
// 1: a LibTorch (TorchScript) archive `step-N.pt`; loading one can run code stored in it, so
//    tfw no longer loads it: `tfw checkpoints upgrade` converts it (checkpoint_upgrade.h).
inline constexpr std::int64_t kCheckpointFormatVersion = 2;
inline constexpr std::int64_t kCheckpointLegacyVersion = 1;
inline constexpr const char* kCheckpointExtension = ".safetensors";

struct CheckpointMeta {
  std::int64_t format_version = kCheckpointFormatVersion;
  std::int64_t step = 0;      // optimiser steps done
  std::int64_t tokens = 0;    // training tokens seen
  std::int64_t examples = 0;  // training examples seen (token windows, images); -1: not recorded
  double flops = 0;           // training FLOPs spent by this run
  double train_loss = 0;      // of the last step
  double val_loss = 0;        // of the last evaluation (NaN if none)
  double best_val_loss = 0;
  double wall_seconds = 0;    // training time so far
  std::string sampler_state;  // the batch sampler's RNG (the data cursor)
  std::string config_toml;    // the resolved run config (the model as it is now, after any growth)
  // Lineage: the compute this model inherited from the runs it was grown from (their
  // training FLOPs up to the checkpoint it was grown from), and where it came from.
  double inherited_flops = 0;
  std::int64_t parent_run = 0;  // store id of the run it was grown from (0: none or unknown)
  std::string parent_checkpoint;
  std::string growth_method;
  std::string growth_options;  // TOML
  std::int64_t threads = 0;    // torch threads the run trained with (0: not recorded)
  // ATen's CPU kernels the run trained with ("AVX2"; "": not recorded, or a CUDA run).
  std::string cpu_capability;
  // train.grad_accum = "auto": the micro-batch the run trains with, kept on resume (0: not
  // recorded, or the config gives the split).
  std::int64_t micro_batch = 0;
};

struct CheckpointInfo {
  std::string path;  // the .safetensors file (.pt: a legacy one, to upgrade)
  std::int64_t step = 0;
  double val_loss = 0;  // NaN if none
  std::uint64_t size = 0;
  std::uint32_t crc32 = 0;
};

// Complete checkpoints (archive and manifest present) in `dir`, by the step in their file
// names; not verified.
std::vector<CheckpointInfo> checkpoint_list(const std::string& dir);

// Checks the manifest against the archive (its name, step, size and CRC-32); throws
// UsageError naming the problem. A legacy (version 1) checkpoint is refused with the command
// that upgrades it.
void checkpoint_verify(const std::string& path);

// The newest checkpoint in `dir` that verifies and loads, with its metadata in `meta` when
// given (read once: callers need not read it again). Each newer one that does not is
// skipped, and why is appended to `skipped` (for the caller to say out loud). Throws
// UsageError when none is valid.
CheckpointInfo checkpoint_latest_valid(const std::string& dir, std::vector<std::string>* skipped,
                                       CheckpointMeta* meta = nullptr);

// Reads only the metadata (verifies first).
CheckpointMeta checkpoint_read_meta(const std::string& path);

// The run config a checkpoint holds (meta.config_toml), rebuilt: `where` is the checkpoint's
// path, the source its errors name. With a `device`, on that device instead of the one the run
// trained on (checkpoints are device-free; "cpu" also drops the CUDA-only train.tf32). A config
// that is not valid TOML is a UsageError naming the checkpoint; run_config_parse's errors pass
// through (an unknown family: the plugin is not loaded).
RunConfig checkpoint_run_config(const Registry& registry, const CheckpointMeta& meta, const std::string& where,
                                const std::string& device = "");

// The metadata entries checkpoint_save writes for `meta`.
std::map<std::string, std::string> checkpoint_metadata(const CheckpointMeta& meta);

// checkpoint_verify for a given format version (the upgrade verifies version 1 files).
void checkpoint_verify_version(const std::string& path, std::int64_t expected);

// The manifest beside a checkpoint archive: step-XXXXXXXX.safetensors -> step-XXXXXXXX.toml.
std::string checkpoint_manifest_path(const std::string& archive);

// Moves every checkpoint after `step` aside (manifest and archive renamed to *.damaged, kept
// for inspection), so that a resume from `step` rewrites those steps; returns their archives.
std::vector<std::string> checkpoint_set_aside_newer(const std::string& dir, std::int64_t step);

// Deletes all but the last `keep` checkpoints and the one with the best val_loss; returns
// the archives it deleted.
std::vector<std::string> checkpoint_prune(const std::string& dir, std::int64_t keep);

// The CheckpointMeta of a checkpoint's `__metadata__` entries; UsageError naming `path` and
// the entry where one is missing, not a number, or out of range.
CheckpointMeta checkpoint_meta_from(const std::map<std::string, std::string>& metadata, const std::string& path);

}  // namespace tfw
