#include "engine/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <zlib.h>

#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw {

void path_fsync(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

namespace {

// file_write_durably, its errors prefixed with `who` ("import: ") and, on a full disk,
// `disk_full_hint`.
void write_durably(const std::string& path, const char* bytes, std::size_t size, const std::string& who,
                   const char* disk_full_hint) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(fmt::format("{}cannot create '{}': {}", who, path, std::strerror(errno)));
  }
  auto fail = [&](const char* what) {
    const int code = errno;
    ::close(fd);
    ::unlink(path.c_str());
    std::string hint =
        code == ENOSPC || code == EDQUOT ? disk_full_hint : "check the disk and the folder's permissions";
    throw Error(with_hint(fmt::format("{}cannot {} '{}': {}", who, what, path, std::strerror(code)), hint));
  };
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      fail("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("sync");
  if (::close(fd) != 0) {
    const int code = errno;
    ::unlink(path.c_str());
    throw Error(fmt::format("{}cannot close '{}': {}", who, path, std::strerror(code)));
  }
}

}  // namespace

void file_write_durably(const std::string& path, const char* bytes, std::size_t size) {
  write_durably(path, bytes, size, "", "free space on that disk (or move TFW_HOME), then resume the run");
}

void text_file_write(const std::string& path, const std::string& text, const std::string& who) {
  write_durably(path, text.data(), text.size(), who + ": ", "free space on that disk, then run it again");
}

std::uint32_t file_crc32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(1 << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(in.gcount()));
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace tfw
