// A reader of PyTorch's zip checkpoint format. See torch_pickle.h.
//
// The format (torch/serialization.py, `_save`): a zip archive whose records are
// `<archive>/data.pkl`, a pickle of the saved object in which each storage is a persistent id
// ('storage', storage class, key, location, numel), and `<archive>/data/<key>`, the storage's
// raw bytes (little-endian; `<archive>/byteorder` says so in PyTorch >= 2.1). A tensor is
// `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, meta])`.
#include "engine/interop/torch_pickle.h"

#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/interop/torch_pickle_interpreter.h"
#include "engine/interop/zip_directory.h"

namespace tfw {

namespace {

using namespace torch_pickle_detail;

// data.pkl is the object graph, not the weights: a 7B model's is a few hundred KB.
constexpr std::uint64_t kMaxPickleBytes = 64ull << 20;

bool all_tensors(const PyValue& dict) {
  if (dict.kind != PyValue::Kind::dict || dict.entries.empty()) return false;
  for (const auto& [key, value] : dict.entries) {
    if (key->kind != PyValue::Kind::string || value->kind != PyValue::Kind::tensor) return false;
  }
  return true;
}

// Opens a torch.save / LibTorch zip archive and runs `body` on its pickle's root value. Errors
// name the file; a legacy (pre-1.6) file or a non-zip file gets the fix.
template <typename Body>
auto with_archive_root(const std::string& path, Body body) {
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(fmt::format("{}: cannot open the file", path));
    char magic[4] = {};
    in.read(magic, 4);
    if (in.gcount() < 4 || std::memcmp(magic, "PK\x03\x04", 4) != 0) {
      const bool legacy = static_cast<unsigned char>(magic[0]) == 0x80;
      throw UsageError(with_hint(
          legacy ? fmt::format("{}: saved in PyTorch's legacy (before 1.6) format, which is not read", path)
                 : fmt::format("{}: not a PyTorch checkpoint (no zip archive)", path),
          legacy ? "save it again in the zip format: python3 -c \"import torch; torch.save(torch.load('F'), 'F')\""
                 : "name a pytorch_model.bin or .pt file written by torch.save"));
    }
  }
  zip_sizes_check(path);
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> archive;
  try {
    archive = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const c10::Error& e) {
    throw UsageError(
        with_hint(fmt::format("{}: a corrupt or truncated zip archive ({})", path, e.what_without_backtrace()),
                  "download or copy the file again"));
  }
  try {
    if (archive->hasRecord("byteorder")) {
      record_size_check(*archive, "byteorder", 16, path);
      auto [order, bytes] = archive->getRecord("byteorder");
      if (std::string(static_cast<const char*>(order.get()), bytes) != "little") {
        throw UsageError(fmt::format("{}: saved on a big-endian machine, which is not read", path));
      }
    }
    if (!archive->hasRecord("data.pkl")) throw UsageError(fmt::format("{}: the archive has no data.pkl", path));
    record_size_check(*archive, "data.pkl", kMaxPickleBytes, path);
    auto [pickle, bytes] = archive->getRecord("data.pkl");
    PyRef root = pickle_run(path, *archive, static_cast<const char*>(pickle.get()), bytes);
    return body(root);
  } catch (const c10::Error& e) {
    throw UsageError(with_hint(fmt::format("{}: a corrupt or truncated archive ({})", path, e.what_without_backtrace()),
                               "download or copy the file again"));
  }
}

constexpr int kMaxArchiveDepth = 64;
// Values visited, a shared one each time it is reached: the memo lets a 1.6 KB file name one
// dict twice at each of 40 levels, 2^40 values to a walk that follows every name.
constexpr std::size_t kMaxArchiveVisits = std::size_t{1} << 21;

// Depth-first over dicts and objects' state dicts, with dotted names; bounded depth (a
// cyclic or hostile nesting is refused, not followed) and a bounded number of values visited.
void flatten(const std::string& path, const PyValue& value, const std::string& name, int depth,
             std::map<std::string, ArchiveLeaf>& out, std::size_t& visits) {
  if (depth > kMaxArchiveDepth) {
    throw UsageError(
        fmt::format("{}: objects nested deeper than {} levels at '{}'", path, kMaxArchiveDepth, name.substr(0, 200)));
  }
  if (++visits > kMaxArchiveVisits) {
    throw UsageError(with_hint(fmt::format("{}: holds more than {} values, counting a shared one each time it is "
                                           "named: not a checkpoint",
                                           path, kMaxArchiveVisits),
                               "a model's checkpoint names each tensor once; this file repeats shared objects"));
  }
  ArchiveLeaf leaf;
  switch (value.kind) {
    case PyValue::Kind::dict:
    case PyValue::Kind::object:
      for (const auto& [key, item] : value.entries) {
        if (key->kind != PyValue::Kind::string) continue;
        flatten(path, *item, name.empty() ? key->text : name + "." + key->text, depth + 1, out, visits);
      }
      return;
    case PyValue::Kind::tensor:
      leaf.kind = ArchiveLeaf::Kind::tensor;
      leaf.tensor = value.tensor;
      break;
    case PyValue::Kind::integer:
      leaf.kind = ArchiveLeaf::Kind::integer;
      leaf.integer = value.integer;
      break;
    case PyValue::Kind::boolean:
      leaf.kind = ArchiveLeaf::Kind::boolean;
      leaf.integer = value.integer;
      break;
    case PyValue::Kind::real:
      leaf.kind = ArchiveLeaf::Kind::real;
      leaf.real = value.real;
      break;
    case PyValue::Kind::string:
      leaf.kind = ArchiveLeaf::Kind::string;
      leaf.text = value.text;
      break;
    case PyValue::Kind::tuple:
    case PyValue::Kind::list:
      leaf.kind = ArchiveLeaf::Kind::reals;
      for (const PyRef& item : value.items) {
        if (item->kind == PyValue::Kind::real)
          leaf.reals.push_back(item->real);
        else if (item->kind == PyValue::Kind::integer)
          leaf.reals.push_back(static_cast<double>(item->integer));
        else
          return;  // not a tuple of numbers: not something a tfw checkpoint holds
      }
      break;
    default: return;
  }
  out[name] = std::move(leaf);
}

}  // namespace

std::map<std::string, ArchiveLeaf> torch_archive_flatten(const std::string& path) {
  return with_archive_root(path, [&](const PyRef& root) {
    std::map<std::string, ArchiveLeaf> out;
    std::size_t visits = 0;
    flatten(path, *root, "", 0, out, visits);
    return out;
  });
}

std::vector<std::pair<std::string, torch::Tensor>> torch_state_dict_read(const std::string& path) {
  return with_archive_root(path, [&](const PyRef& root) {
    const PyValue* dict = root.get();
    if (!all_tensors(*dict) && dict->kind == PyValue::Kind::dict) {
      for (const auto& [key, value] : dict->entries) {
        if (key->kind == PyValue::Kind::string &&
            (key->text == "module" || key->text == "state_dict" || key->text == "model") && all_tensors(*value)) {
          dict = value.get();
          break;
        }
      }
    }
    if (!all_tensors(*dict)) {
      throw UsageError(with_hint(fmt::format("{}: holds no state dict (a dict of names to tensors)", path),
                                 "name the model's weights: a state dict, or a dict with one under \"module\""));
    }
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& [key, value] : dict->entries) tensors.emplace_back(key->text, value->tensor);
    return tensors;
  });
}

}  // namespace tfw
