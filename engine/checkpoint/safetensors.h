// The safetensors format (https://huggingface.co/docs/safetensors), read and written by our
// own code: a file is plain data and cannot run anything. Torch-free, so that its fuzz target
// and the CLI plumbing build without torch.
//
// Layout: an 8-byte little-endian header length N, N bytes of a JSON header, then the data.
// The header maps each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the start of the data), and "__metadata__" to an object of string values.
//
// The parser trusts nothing. Before anything is allocated it checks, with checked arithmetic:
//   - N is at most kSafetensorsMaxHeader (100 MiB) and at most the bytes that follow it;
//   - the JSON nests at most 3 levels (counted while parsing), with at most kSafetensorsMaxTensors (1,000,000) tensors
//     and kSafetensorsMaxMetadata (10,000) metadata entries, names of at most 1,024 bytes;
//   - each shape has at most 8 dimensions, none negative, and shape × element size equals the
//     tensor's byte range without overflowing 64 bits;
//   - the ranges lie inside the data, do not overlap and leave no gap, and the data ends where
//     the last one does (so a truncated or padded file is refused);
//   - dtypes are those of the format (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL).
// Every failure is a UsageError that names the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tfw {

inline constexpr std::uint64_t kSafetensorsMaxHeader = 100ull << 20;
inline constexpr std::size_t kSafetensorsMaxTensors = 1000000;
inline constexpr std::size_t kSafetensorsMaxMetadata = 10000;
inline constexpr std::size_t kSafetensorsMaxName = 1024;
inline constexpr std::size_t kSafetensorsMaxRank = 8;

// The size in bytes of one element of a safetensors dtype ("F32" -> 4); 0 for an unknown one.
std::size_t safetensors_element_size(const std::string& dtype);

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", …
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range in the data
  const char* data = nullptr;        // writing: the bytes; reading: points into the parsed buffer
};

struct SafetensorsFile {
  std::vector<SafetensorsEntry> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Parses `size` bytes at `bytes` (a whole file, e.g. mapped). `what` names it in errors. The
// entries' `data` point into `bytes`, which must outlive the result.
SafetensorsFile safetensors_parse(const char* bytes, std::size_t size, const std::string& what);

// The file's bytes: tensors sorted by name, data in that order, the header padded with spaces
// to a multiple of 8 bytes. `begin`/`end` of the entries are ignored (computed); each entry's
// `data` holds shape × element-size bytes. The same tensors and metadata always give the same
// bytes. Throws Error on a duplicate name or an unknown dtype.
std::string safetensors_encode(std::vector<SafetensorsEntry> tensors,
                               const std::map<std::string, std::string>& metadata);

}  // namespace tfw
