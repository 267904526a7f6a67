// File durability: fsync a file or folder by path (errors ignored: best effort after the
// data itself was written and checked), so that a rename is durable across a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfw {

void path_fsync(const std::string& path);

// Writes `bytes` to `path` (created or truncated) and fsyncs it. On any failure (a full disk,
// a quota, an I/O error) removes the partial file and throws Error naming the file, the
// reason and the fix; never leaves a partial file behind.
void file_write_durably(const std::string& path, const char* bytes, std::size_t size);

// A small text file (a model.toml, a config.json) written as file_write_durably writes: on any
// failure (an unwritable folder, a full disk) no partial file is left, and the Error says what
// wrote it (`who`, e.g. "import": "import: cannot create 'DIR/model.toml': Permission denied"),
// the file, the reason and the fix.
void text_file_write(const std::string& path, const std::string& text, const std::string& who);

// The CRC-32 (zlib's) of a file's bytes, read in 1 MiB blocks; of no bytes when it cannot be read.
std::uint32_t file_crc32(const std::string& path);

}  // namespace tfw
