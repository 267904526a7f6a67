// See zip_directory.h. Found by the pickle fuzzer: a forged 2 GiB `version` record
// made LibTorch's reader allocate 2 GiB as it opened a 323-byte file.
#include "engine/interop/zip_directory.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw {

namespace {

std::uint64_t le(const std::string& bytes, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return v;
}

}  // namespace

void zip_sizes_check(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::uint64_t size = std::filesystem::file_size(path), limit = 4 * size + (1ull << 20);
  const std::uint64_t tail_size = std::min<std::uint64_t>(size, 22 + 65535);
  std::string tail(tail_size, '\0');
  in.seekg(static_cast<std::streamoff>(size - tail_size));
  in.read(tail.data(), static_cast<std::streamsize>(tail_size));
  const std::size_t end = tail.rfind(std::string("PK\x05\x06", 4));
  if (!in || end == std::string::npos || end + 22 > tail.size()) return;
  std::uint64_t cd_size = le(tail, end + 12, 4), cd_offset = le(tail, end + 16, 4);
  if (cd_offset == 0xFFFFFFFFu && end >= 20 && tail.compare(end - 20, 4, std::string("PK\x06\x07", 4)) == 0) {
    const std::uint64_t zip64_end = le(tail, end - 20 + 8, 8);  // the zip64 end record, in the file
    std::string record(56, '\0');
    in.seekg(static_cast<std::streamoff>(std::min(zip64_end, size)));
    if (!in.read(record.data(), 56) || record.compare(0, 4, std::string("PK\x06\x06", 4)) != 0) return;
    cd_size = le(record, 40, 8);
    cd_offset = le(record, 48, 8);
  }
  if (cd_offset > size || cd_size > size - cd_offset || cd_size > (64ull << 20)) return;
  std::string cd(cd_size, '\0');
  in.seekg(static_cast<std::streamoff>(cd_offset));
  if (!in.read(cd.data(), static_cast<std::streamsize>(cd_size))) return;
  for (std::size_t at = 0; at + 46 <= cd.size() && cd.compare(at, 4, std::string("PK\x01\x02", 4)) == 0;) {
    const std::size_t name = le(cd, at + 28, 2), extra = le(cd, at + 30, 2), comment = le(cd, at + 32, 2);
    if (at + 46 + name + extra + comment > cd.size()) return;
    std::uint64_t inflated = le(cd, at + 24, 4);
    for (std::size_t e = at + 46 + name; inflated == 0xFFFFFFFFu && e + 4 <= at + 46 + name + extra;) {
      const std::size_t id = le(cd, e, 2), length = le(cd, e + 2, 2);
      if (id == 1 && length >= 8 && e + 12 <= cd.size()) inflated = le(cd, e + 4, 8);
      e += 4 + length;
    }
    if (inflated > limit) {
      throw UsageError(
          with_hint(fmt::format("{}: its record {} declares {} bytes inflated, more than the {} this file "
                                "may hold",
                                path, cd.substr(at + 46, name), inflated, limit),
                    "torch.save stores records uncompressed; this one was inflated on purpose or damaged"));
    }
    at += 46 + name + extra + comment;
  }
}

}  // namespace tfw
