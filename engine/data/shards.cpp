// Token shards: prepare, read, list. See shards.h.
#include "engine/data/shards.h"

#include <cerrno>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/data/corpus.h"
#include "engine/core/home.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"
#include "engine/core/files.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

// Buffered little-endian writer of uint16 or uint32 ids.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, int width) : out_(path, std::ios::binary | std::ios::trunc), width_(width) {
    if (!out_) throw Error(fmt::format("cannot write '{}'", path));
  }
  void write(const std::vector<std::uint32_t>& ids) {
    buffer_.clear();
    for (std::uint32_t id : ids) {
      for (int b = 0; b < width_; ++b) buffer_.push_back(static_cast<char>((id >> (8 * b)) & 0xff));
    }
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    count_ += ids.size();
  }
  std::uint64_t count() const { return count_; }
  void close() {
    out_.flush();
    if (!out_) throw Error("writing a token shard failed (disk full?)");
    out_.close();
  }

 private:
  std::ofstream out_;
  int width_;
  std::vector<char> buffer_;
  std::uint64_t count_ = 0;
};

// Removes train.bin/val.bin/meta.toml.tmpPID files whose process is gone.
void sweep_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const char* stem : {"train.bin.tmp", "val.bin.tmp", "meta.toml.tmp"}) {
      if (name.rfind(stem, 0) != 0) continue;
      const std::string digits = name.substr(std::strlen(stem));
      if (digits.empty() || digits.size() > 10 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::stoll(digits));
      if (pid == ::getpid() || (::kill(pid, 0) != 0 && errno == ESRCH)) fs::remove(entry.path(), ec);
    }
  }
}

std::string name_of(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// The mode shard files get: their folder's parent's (TFW_HOME/data, or the home itself when
// data/ is new, which then gets the home's mode too), without execute bits. A home of 0700 keeps
// its text 0600; a corpus read from anywhere is never written world-readable into a private home.
fs::perms shard_mode(const fs::path& out_dir) {
  std::error_code ec;
  const fs::path parent = fs::absolute(out_dir, ec).parent_path();
  if (!fs::exists(parent, ec)) {
    const fs::perms home = fs::status(parent.parent_path(), ec).permissions();
    fs::create_directories(parent);
    if (home != fs::perms::unknown) fs::permissions(parent, home & fs::perms::all, ec);
  }
  const fs::perms from = fs::status(parent, ec).permissions();
  if (ec || from == fs::perms::unknown) return fs::perms::owner_read | fs::perms::owner_write;
  const fs::perms readable = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                             fs::perms::group_write | fs::perms::others_read | fs::perms::others_write;
  return (from & readable) | fs::perms::owner_read | fs::perms::owner_write;
}

}  // namespace

ShardMeta data_prepare(const std::string& corpus, const std::string& out_dir, const PrepareOptions& options) {
  if (options.block_bytes == 0 || options.val_every < 2) {
    throw UsageError("data prepare: block_bytes must be positive and val_every at least 2");
  }
  std::unique_ptr<Tokenizer> tokenizer = tokenizer_create(options.tokenizer);
  CorpusInfo info;
  std::unique_ptr<TextStream> stream = corpus_open(corpus, &info);
  const fs::perms mode = shard_mode(out_dir);
  fs::create_directories(out_dir);

  ShardMeta meta;
  meta.corpus = info.package.empty() ? name_of(info.path) : info.name;
  meta.source = info.path;
  meta.tokenizer = tokenizer->name();
  meta.vocab_size = tokenizer->vocab_size();
  meta.dtype = meta.vocab_size <= 65536 ? "uint16" : "uint32";
  meta.block_bytes = options.block_bytes;
  meta.val_every = options.val_every;
  const int width = meta.dtype == "uint16" ? 2 : 4;

  // Temporary names carry the pid: two processes preparing the same corpus do not collide,
  // and the renames below make the last complete one win. Files an earlier attempt left
  // (a process that died, or a disk that filled) are removed first, and this attempt's are
  // removed if it fails: each retry on a full disk used to add three more.
  sweep_stale_temporaries(out_dir);
  const std::string suffix = fmt::format(".tmp{}", ::getpid());
  const std::string train_tmp = out_dir + "/train.bin" + suffix, val_tmp = out_dir + "/val.bin" + suffix;
  const std::string meta_tmp = out_dir + "/meta.toml" + suffix;
  struct RemoveOnFailure {
    std::vector<std::string> paths;
    bool done = false;
    ~RemoveOnFailure() {
      if (done) return;
      std::error_code ec;
      for (const std::string& path : paths) fs::remove(path, ec);
    }
  } temporaries{{train_tmp, val_tmp, meta_tmp}};
  ShardWriter train(train_tmp, width), val(val_tmp, width);
  std::string block(options.block_bytes, '\0');
  std::vector<std::uint32_t> ids;
  for (std::uint64_t index = 0;; ++index) {
    // Fill one block (a short read is not the end; 0 is).
    std::size_t filled = 0;
    while (filled < block.size()) {
      std::size_t got = stream->read(block.data() + filled, block.size() - filled);
      if (got == 0) break;
      filled += got;
    }
    if (filled == 0) break;
    ids.clear();
    tokenizer->encode(std::string_view(block.data(), filled), ids);
    (index % options.val_every == options.val_every - 1 ? val : train).write(ids);
    if (options.on_progress) options.on_progress(stream->progress(), train.count() + val.count());
    if (filled < block.size()) break;
  }
  train.close();
  val.close();
  meta.train_tokens = train.count();
  meta.val_tokens = val.count();
  if (meta.train_tokens == 0) throw UsageError(fmt::format("corpus '{}' is empty", corpus));
  if (meta.val_tokens == 0 && meta.train_tokens >= 2) {
    // A text shorter than val_every blocks gave no validation block: its last
    // 1/val_every of tokens become the validation shard instead (the end of the text).
    const std::uint64_t moved = std::max<std::uint64_t>(1, meta.train_tokens / meta.val_every);
    const std::uint64_t kept = meta.train_tokens - moved;
    std::string tail(moved * static_cast<std::uint64_t>(width), '\0');
    {
      std::ifstream in(train_tmp, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(kept * static_cast<std::uint64_t>(width)));
      in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
      if (!in) throw Error(fmt::format("cannot re-read '{}'", train_tmp));
    }
    std::ofstream rewritten(val_tmp, std::ios::binary | std::ios::trunc);
    rewritten.write(tail.data(), static_cast<std::streamsize>(tail.size()));
    rewritten.flush();
    if (!rewritten) throw Error(fmt::format("writing '{}' failed (disk full?)", val_tmp));
    fs::resize_file(train_tmp, kept * static_cast<std::uint64_t>(width));
    meta.train_tokens = kept;
    meta.val_tokens = moved;
  }

  toml::table table{{"format_version", meta.format_version},
                    {"corpus", meta.corpus},
                    {"source", meta.source},
                    {"tokenizer", meta.tokenizer},
                    {"vocab_size", static_cast<std::int64_t>(meta.vocab_size)},
                    {"dtype", meta.dtype},
                    {"train_tokens", static_cast<std::int64_t>(meta.train_tokens)},
                    {"val_tokens", static_cast<std::int64_t>(meta.val_tokens)},
                    {"block_bytes", static_cast<std::int64_t>(meta.block_bytes)},
                    {"val_every", static_cast<std::int64_t>(meta.val_every)}};
  {
    std::ofstream out(meta_tmp);
    out << "# tfw token shards: train.bin / val.bin, little-endian " << meta.dtype << "\n" << table << "\n";
    out.flush();
    if (!out) throw Error(fmt::format("writing '{}' failed (disk full?)", meta_tmp));
  }
  for (const std::string& path : {train_tmp, val_tmp, meta_tmp}) {
    fs::permissions(path, mode);
    path_fsync(path);
  }
  fs::rename(train_tmp, out_dir + "/train.bin");
  fs::rename(val_tmp, out_dir + "/val.bin");
  fs::rename(meta_tmp, out_dir + "/meta.toml");
  temporaries.done = true;
  path_fsync(out_dir);
  return meta;
}

ShardMeta shard_meta_read(const std::string& dir) {
  ShardMeta meta;
  const std::string train_path = dir + "/train.bin", val_path = dir + "/val.bin";
  if (!fs::exists(train_path) || !fs::exists(val_path)) {
    throw UsageError(with_hint(fmt::format("'{}' holds no token shards (train.bin and val.bin)", dir),
                               "prepare a corpus with `tfw data prepare CORPUS`"));
  }
  if (fs::exists(dir + "/meta.toml")) {
    toml::table table;
    try {
      table = toml::parse_file(dir + "/meta.toml");
    } catch (const toml::parse_error& e) {
      throw UsageError(with_hint(fmt::format("{}/meta.toml is corrupt: {}", dir, e.description()),
                                 "prepare the corpus again with `tfw data prepare`"));
    }
    meta.format_version = static_cast<int>(table["format_version"].value_or(0));
    if (meta.format_version != kShardFormatVersion) {
      throw UsageError(with_hint(fmt::format("{}/meta.toml has shard format version {}, this tfw reads version {}", dir,
                                             meta.format_version, kShardFormatVersion),
                                 "prepare the corpus again with this tfw"));
    }
    meta.corpus = table["corpus"].value_or(std::string());
    meta.source = table["source"].value_or(std::string());
    meta.tokenizer = table["tokenizer"].value_or(std::string());
    meta.vocab_size = static_cast<std::uint32_t>(table["vocab_size"].value_or(0));
    meta.dtype = table["dtype"].value_or(std::string("uint16"));
    meta.block_bytes = static_cast<std::uint64_t>(table["block_bytes"].value_or(0));
    meta.val_every = static_cast<std::uint64_t>(table["val_every"].value_or(0));
  } else {  // a nanoGPT-layout folder made by other tools
    meta.corpus = name_of(dir);
    meta.source = dir;
    meta.tokenizer = "unknown";
    meta.dtype = "uint16";
  }
  if (meta.dtype != "uint16" && meta.dtype != "uint32") {
    throw UsageError(fmt::format("{}: unknown dtype '{}' (uint16 or uint32)", dir, meta.dtype));
  }
  TokenShard train(train_path, meta.dtype), val(val_path, meta.dtype);
  meta.train_tokens = train.size();
  meta.val_tokens = val.size();
  if (meta.vocab_size == 0) {  // infer from the data: the largest id + 1
    std::uint32_t top = 0;
    for (const TokenShard* shard : {&train, &val}) {
      for (std::uint64_t i = 0; i < shard->size(); ++i) top = std::max(top, (*shard)[i]);
    }
    meta.vocab_size = top + 1;
  }
  return meta;
}

TokenShard::TokenShard(const std::string& path, const std::string& dtype) : width_(dtype == "uint32" ? 4 : 2) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw UsageError(fmt::format("cannot open token shard '{}'", path));
  struct stat status {};
  ::fstat(fd, &status);
  bytes_ = static_cast<std::size_t>(status.st_size);
  if (bytes_ % width_ != 0) {
    ::close(fd);
    throw UsageError(with_hint(fmt::format("token shard '{}' has {} bytes, not a multiple of {} ({}): truncated or "
                                           "not this dtype",
                                           path, bytes_, width_, dtype),
                               "prepare the corpus again with `tfw data prepare`"));
  }
  count_ = bytes_ / width_;
  if (bytes_ > 0) {
    void* mapped = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      throw Error(fmt::format("cannot map token shard '{}'", path));
    }
    data_ = static_cast<const unsigned char*>(mapped);
  }
  ::close(fd);
}

TokenShard::~TokenShard() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), bytes_);
}

std::uint32_t TokenShard::operator[](std::uint64_t i) const {
  const unsigned char* p = data_ + i * width_;
  std::uint32_t value = p[0] | (static_cast<std::uint32_t>(p[1]) << 8);
  if (width_ == 4) value |= (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
  return value;
}

void TokenShard::read(std::uint64_t start, std::uint64_t n, std::vector<std::uint32_t>& out) const {
  if (start + n > count_)
    throw Error(fmt::format("token shard read [{}, {}) past its end {}", start, start + n, count_));
  out.resize(n);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = (*this)[start + i];
}

std::string data_prepared_dir(const std::string& corpus, const std::string& tokenizer, const std::string& data_dir) {
  return data_dir + "/" + name_of(corpus) + "-" + tokenizer_label(tokenizer);
}

std::string data_ensure_prepared(const std::string& corpus, const std::string& tokenizer, const std::string& data_dir,
                                 const PrepareOptions& options) {
  std::error_code ec;
  if (fs::exists(corpus, ec)) confine_check(corpus, "data.corpus");
  if (fs::is_directory(corpus, ec) && fs::exists(fs::path(corpus) / "train.bin") &&
      fs::exists(fs::path(corpus) / "val.bin")) {
    return corpus;
  }
  const std::string dir = data_prepared_dir(corpus, tokenizer, data_dir);
  if (!fs::exists(dir + "/meta.toml")) {
    PrepareOptions with_tokenizer = options;
    with_tokenizer.tokenizer = tokenizer;
    data_prepare(corpus, dir, with_tokenizer);
  }
  return dir;
}

std::vector<std::pair<std::string, ShardMeta>> data_list(const std::string& data_dir) {
  std::vector<std::pair<std::string, ShardMeta>> prepared;
  std::error_code ec;
  if (!fs::is_directory(data_dir, ec)) return prepared;
  std::vector<std::string> dirs;
  for (const auto& entry : fs::directory_iterator(data_dir)) {
    if (entry.is_directory() && fs::exists(entry.path() / "train.bin") && fs::exists(entry.path() / "val.bin")) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  for (const std::string& dir : dirs) prepared.emplace_back(dir, shard_meta_read(dir));
  return prepared;
}

}  // namespace tfw
