// Internal to the pickle reader (torch_pickle.cpp): the values its interpreter builds. Only
// what a state dict needs is kept precisely; a value frees its children without recursion.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/nn/libtorch.h"

namespace tfw::torch_pickle_detail {

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

// A value on the interpreter's stack: only what a state dict needs is kept precisely.
struct PyValue {
  enum class Kind { none, boolean, integer, real, string, bytes, tuple, list, dict, global, object, tensor, storage };
  Kind kind = Kind::none;
  std::int64_t integer = 0;  // boolean too
  double real = 0;
  std::string text;                                    // string, bytes, and a global's or an object's "module.name"
  std::vector<PyRef> items;                            // tuple, list
  std::vector<std::pair<PyRef, PyRef>> entries;        // dict, and an object's state dict, in insertion order
  std::unordered_map<std::string, std::size_t> index;  // a dict's string keys -> entries (linear scans were quadratic)
  torch::Tensor tensor;                                // tensor; storage (1-D, its dtype)

  PyValue() = default;
  PyValue(const PyValue&) = delete;
  PyValue& operator=(const PyValue&) = delete;
  // Iterative: a value nested 10^5 deep (a hostile pickle) must not recurse through
  // destructors and overflow the stack. Children whose last owner is this value are emptied
  // before they die, so each destructor runs at most one level deep.
  ~PyValue() {
    std::vector<PyRef> work;
    auto take = [&work](PyValue& value) {
      for (PyRef& item : value.items) work.push_back(std::move(item));
      for (auto& [key, item] : value.entries) {
        work.push_back(std::move(key));
        work.push_back(std::move(item));
      }
      value.items.clear();
      value.entries.clear();
    };
    take(*this);
    while (!work.empty()) {
      PyRef value = std::move(work.back());
      work.pop_back();
      if (value && value.use_count() == 1) take(*value);
    }
  }
};

inline PyRef make(PyValue::Kind kind) {
  auto value = std::make_shared<PyValue>();
  value->kind = kind;
  return value;
}

inline PyRef make_text(PyValue::Kind kind, std::string text) {
  PyRef value = make(kind);
  value->text = std::move(text);
  return value;
}

inline PyRef make_integer(std::int64_t integer, PyValue::Kind kind = PyValue::Kind::integer) {
  PyRef value = make(kind);
  value->integer = integer;
  return value;
}

}  // namespace tfw::torch_pickle_detail
