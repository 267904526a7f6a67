// IDX files. See idx.h.
#include "engine/data/idx.h"

#include <zlib.h>

#include <memory>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw {

namespace {

constexpr std::int64_t kMaxElements = std::int64_t{1} << 34;  // 16 Gi: a corrupt header, not data

// gzread reads plain files too (transparently): one reader for both.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {
    file_ = gzopen(path_.c_str(), "rb");
    if (file_ == nullptr) throw UsageError(fmt::format("{}: cannot open the file", path_));
  }
  ~Reader() {
    if (file_ != nullptr) gzclose(file_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Reads exactly n bytes; `what` names them in the error when the file ends first.
  void read(void* out, std::size_t n, const std::string& what) {
    std::size_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
      const int got = gzread(file_, static_cast<char*>(out) + done, chunk);
      if (got < 0) fail_gzip();
      if (got == 0) {
        throw UsageError(
            with_hint(fmt::format("{}: truncated: the file ends after {} of the {} bytes of {}", path_, done, n, what),
                      "the file is incomplete; reinstall it (for Fashion-MNIST: apt-get install "
                      "--reinstall dataset-fashion-mnist)"));
      }
      done += static_cast<std::size_t>(got);
    }
  }
  std::uint32_t big_endian_u32(const std::string& what) {
    unsigned char b[4];
    read(b, 4, what);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  }
  bool at_end() {
    char c;
    const int got = gzread(file_, &c, 1);
    if (got < 0) fail_gzip();
    return got == 0;
  }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail_gzip() {
    int code = 0;
    const char* message = gzerror(file_, &code);
    throw UsageError(with_hint(fmt::format("{}: a corrupt gzip stream ({})", path_, message ? message : "unknown"),
                               "the file is damaged; reinstall or download it again"));
  }
  std::string path_;
  gzFile file_ = nullptr;
};

std::vector<std::int64_t> header(Reader& in) {
  const std::uint32_t magic = in.big_endian_u32("the magic number");
  const std::uint32_t type = (magic >> 8) & 0xFF, rank = magic & 0xFF;
  if ((magic >> 16) != 0 || rank == 0 || rank > 8) {
    throw UsageError(with_hint(fmt::format("{}: not an IDX file (magic number 0x{:08x})", in.path(), magic),
                               "IDX files begin with 0x000008DD, DD the number of dimensions (MNIST: "
                               "0x00000803 for images, 0x00000801 for labels)"));
  }
  if (type != 0x08) {
    throw UsageError(
        fmt::format("{}: IDX element type 0x{:02x} is not read (only unsigned bytes, 0x08)", in.path(), type));
  }
  std::vector<std::int64_t> dims;
  std::int64_t count = 1;
  for (std::uint32_t k = 0; k < rank; ++k) {
    const std::int64_t size = in.big_endian_u32(fmt::format("dimension {}", k));
    dims.push_back(size);
    count *= size;
    if (count > kMaxElements) throw UsageError(fmt::format("{}: an IDX header of implausible size", in.path()));
  }
  return dims;
}

}  // namespace

std::int64_t IdxArray::count() const {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

std::vector<std::int64_t> idx_dims(const std::string& path) {
  Reader in(path);
  return header(in);
}

IdxArray idx_read(const std::string& path) {
  Reader in(path);
  IdxArray array;
  array.dims = header(in);
  array.data.resize(static_cast<std::size_t>(array.count()));
  in.read(array.data.data(), array.data.size(), "the elements");
  if (!in.at_end()) {
    throw UsageError(fmt::format("{}: bytes after the {} elements its header declares", path, array.count()));
  }
  return array;
}

}  // namespace tfw
