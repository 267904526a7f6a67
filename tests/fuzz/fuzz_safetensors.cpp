// libFuzzer target: the safetensors parser (engine/checkpoint/safetensors.h) on arbitrary bytes. Any
// outcome but a parsed file or a UsageError (a crash, a sanitizer report, another exception)
// is a finding. A parsed file is checked against its own promises: every range inside the
// input, sizes that agree, and an encode of it that parses back to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/core/error.h"
#include "engine/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  tfw::SafetensorsFile file;
  try {
    file = tfw::safetensors_parse(bytes, size, "fuzz");
  } catch (const tfw::UsageError&) {
    return 0;
  }
  std::uint64_t total = 0;
  for (const tfw::SafetensorsEntry& entry : file.tensors) {
    if (entry.data < bytes || entry.data + (entry.end - entry.begin) > bytes + size) __builtin_trap();
    total += entry.end - entry.begin;
  }
  if (total > size) __builtin_trap();
  const std::string again = tfw::safetensors_encode(file.tensors, file.metadata);
  const tfw::SafetensorsFile reread = tfw::safetensors_parse(again.data(), again.size(), "re-encoded");
  if (reread.tensors.size() != file.tensors.size() || reread.metadata != file.metadata) __builtin_trap();
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    const auto& a = file.tensors[i];
    const auto& b = reread.tensors[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.end - a.begin != b.end - b.begin ||
        std::memcmp(a.data, b.data, a.end - a.begin) != 0) {
      __builtin_trap();
    }
  }
  return 0;
}
