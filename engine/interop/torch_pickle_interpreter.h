// Internal to the PyTorch checkpoint reader (torch_pickle.cpp): the pickle interpreter, in
// torch_pickle_interpreter.cpp, and the check of a record's declared size that both use.
#pragma once

#include <caffe2/serialize/inline_container.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/interop/torch_pickle_value.h"

namespace tfw::torch_pickle_detail {

// Throws UsageError when `record`'s inflated size, as the zip's directory declares it, is over
// `limit`; checked before the record is inflated. `path` names the file in the message.
void record_size_check(caffe2::serialize::PyTorchStreamReader& archive, const std::string& record, std::uint64_t limit,
                       const std::string& path);

// Runs the pickle `data` (`size` bytes, the archive's data.pkl) and returns its root value.
// Storages are read from `archive` as the pickle names them. Throws UsageError naming `path`
// on an unknown opcode, a malformed stack, or a storage the archive lacks or cannot hold.
PyRef pickle_run(const std::string& path, caffe2::serialize::PyTorchStreamReader& archive, const char* data,
                 std::size_t size);

}  // namespace tfw::torch_pickle_detail
