// `tfw checkpoints upgrade`: the one-way conversion of legacy checkpoints (format version 1, a
// LibTorch archive `step-N.pt`, whose loading can run code stored in it) into today's
// safetensors checkpoints. Torch-free, for the CLI.
//
// The old archive is read as data by our own pickle reader (torch_pickle.h): no class is
// built, nothing in it runs. The model its config describes is built, the weights, AdamW's
// state (matched to parameters by their place in the parameter groups, as LibTorch wrote
// them), the counters, the sampler state and torch's generator state are moved into it, and
// checkpoint_save writes `step-N.safetensors` and a version-2 manifest in place of the old one.
// The new file is read back and compared tensor by tensor (bitwise) before the `.pt` is removed.
// A crash at any moment leaves one complete checkpoint: the old pair or the new one.
#pragma once

#include <string>
#include <vector>

namespace tfw {

class Registry;

// The legacy checkpoints (`.pt` archives whose manifest says version 1) at `path`: the file
// itself, or every one under a folder (searched recursively, e.g. a whole TFW_HOME).
std::vector<std::string> checkpoint_legacy_find(const std::string& path);

// Upgrades one; returns the new file's path. Throws UsageError naming the file and the problem
// (damaged, not a tfw checkpoint, a model its plugins cannot build); the old pair is then kept.
std::string checkpoint_upgrade(const Registry& registry, const std::string& legacy_path);

}  // namespace tfw
