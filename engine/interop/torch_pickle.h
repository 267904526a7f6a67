// Reading a PyTorch `torch.save` file (the zip format of PyTorch >= 1.6: `archive/data.pkl`
// plus one record per storage) into named tensors, without Python.
//
// LibTorch's own `torch::pickle_load` (1.13) cannot read a state dict saved from Python: it
// turns `collections.OrderedDict` into None and does not know the SETITEM opcode (tested:
// docs/import.md). So the archive and its storages are read with LibTorch's zip reader
// (caffe2::serialize::PyTorchStreamReader), and the pickle with the small interpreter here,
// which knows the opcodes of pickle protocols 2 to 5 and the classes a state dict uses
// (OrderedDict, torch._utils._rebuild_tensor_v2 and _rebuild_parameter, the typed storages);
// any other class becomes an opaque object, so a file that also holds other things (an
// optimiser, arguments) still reads as long as its tensors are found.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/libtorch.h"

namespace tfw {

// The tensors of the state dict in `path`, in file order: the top-level dict when its values
// are tensors, else its entry "module", "state_dict" or "model" when that one's are. Each
// tensor is contiguous and owns its memory. Throws UsageError naming the file and the
// problem: not a zip archive (the legacy format: say how to re-save it), a truncated or
// corrupt archive or pickle, no dict of tensors.
std::vector<std::pair<std::string, torch::Tensor>> torch_state_dict_read(const std::string& path);

// One value of a LibTorch archive read as data.
struct ArchiveLeaf {
  enum class Kind { tensor, integer, boolean, real, string, reals };
  Kind kind = Kind::integer;
  torch::Tensor tensor;
  std::int64_t integer = 0;  // integer, boolean
  double real = 0;
  std::string text;
  std::vector<double> reals;  // a tuple or list of numbers
};

// Every value of a zip archive's pickle under dotted names: dicts, and objects of any class
// (TorchScript modules included), are descended through their state dicts, so a legacy tfw
// checkpoint (a LibTorch OutputArchive) reads as "model.layers.0.q.keys", "step", "optimizer.
// state.<id>.exp_avg", …. No class is constructed and no code in the file runs: `__setstate__`
// and the archive's code/ folder are never used. Nesting deeper than 64 levels is refused.
std::map<std::string, ArchiveLeaf> torch_archive_flatten(const std::string& path);

}  // namespace tfw
