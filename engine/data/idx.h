// The IDX format of MNIST and Fashion-MNIST (yann.lecun.com/exdb/mnist: "the IDX file
// format"), plain or gzipped: a magic number 0x0000TTDD (TT the element type, DD the number
// of dimensions), DD big-endian 32-bit sizes, then the elements in row-major order,
// multi-byte types big-endian. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfw {

struct IdxArray {
  std::vector<std::int64_t> dims;  // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<std::uint8_t> data;  // the elements (unsigned bytes: the type MNIST uses)
  std::int64_t count() const;      // the product of dims
};

// Reads `path` (gzipped when it ends in .gz). Only unsigned-byte arrays (type 0x08) are read.
// Throws UsageError naming the file and the problem: not IDX (bad magic), another element
// type, a corrupt gzip stream, fewer bytes than the header promises (truncated), or bytes
// after them.
IdxArray idx_read(const std::string& path);

// Reads only the header (the dims), without reading the elements.
std::vector<std::int64_t> idx_dims(const std::string& path);

}  // namespace tfw
