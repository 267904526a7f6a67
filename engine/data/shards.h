// Token shards: a prepared corpus is a folder with `train.bin` and `val.bin`, little-endian
// uint16 token ids (uint32 when the vocabulary needs it), plus `meta.toml` naming the
// tokenizer, vocabulary size, dtype, source and split. This is nanoGPT's layout, so a folder
// with only train.bin/val.bin made by other tools loads too (uint16; vocabulary = max id + 1).
// Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tfw {

inline constexpr int kShardFormatVersion = 1;

struct ShardMeta {
  int format_version = kShardFormatVersion;
  std::string corpus;     // built-in name or the source path's name
  std::string source;     // what was read
  std::string tokenizer;  // "byte", or "unknown" for foreign shards
  std::uint32_t vocab_size = 0;
  std::string dtype;  // "uint16" or "uint32"
  std::uint64_t train_tokens = 0;
  std::uint64_t val_tokens = 0;
  std::uint64_t block_bytes = 0;  // the split: every val_every-th block of text goes to val
  std::uint64_t val_every = 0;
};

struct PrepareOptions {
  std::string tokenizer = "byte";
  std::uint64_t block_bytes = 1 << 16;  // 64 KiB of text per split block
  std::uint64_t val_every = 20;         // 1 block in 20 (5%) is validation
  // Called now and then with progress in [0, 1] and tokens written so far.
  std::function<void(double progress, std::uint64_t tokens)> on_progress;
};

// Streams `corpus` (a built-in name, file or folder) through the tokenizer into
// `out_dir`/{train,val}.bin and meta.toml. Constant memory. Files are written to temporary
// names and renamed at the end, so an interrupted prepare leaves no half-written shard.
ShardMeta data_prepare(const std::string& corpus, const std::string& out_dir, const PrepareOptions& options);

// Reads meta.toml, or infers it for a nanoGPT-layout folder. Throws UsageError when the
// folder holds no shards, or when a shard's size does not fit its dtype.
ShardMeta shard_meta_read(const std::string& dir);

// A read-only, memory-mapped token shard.
class TokenShard {
 public:
  TokenShard(const std::string& path, const std::string& dtype);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  std::uint64_t size() const { return count_; }
  std::uint32_t operator[](std::uint64_t i) const;
  // Copies tokens [start, start + n) into out.
  void read(std::uint64_t start, std::uint64_t n, std::vector<std::uint32_t>& out) const;

 private:
  const unsigned char* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::uint64_t count_ = 0;
  int width_ = 2;
};

// Where `corpus` prepared with `tokenizer` lives: <data_dir>/<corpus name>-<tokenizer>.
std::string data_prepared_dir(const std::string& corpus, const std::string& tokenizer, const std::string& data_dir);

// The shard folder for `corpus`: itself when it already holds train.bin and val.bin,
// else <data_dir>/<name>-<tokenizer>, prepared first when missing.
std::string data_ensure_prepared(const std::string& corpus, const std::string& tokenizer, const std::string& data_dir,
                                 const PrepareOptions& options);

// Prepared corpora under `data_dir` (TFW_HOME/data), one per folder.
std::vector<std::pair<std::string, ShardMeta>> data_list(const std::string& data_dir);

}  // namespace tfw
