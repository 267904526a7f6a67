// Corpus readers. See corpus.h.
#include "engine/data/corpus.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/home.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

// The kjv text comes from the `bible` program of bible-kjv (its data file is compressed
// in the program's own format); its full text is about 4.4 MB.
constexpr const char* kBibleCommand = "bible -f Gen1:1-Rev22:21 2>/dev/null";
constexpr double kBibleBytes = 4404412.0;

class GzipStream : public TextStream {
 public:
  explicit GzipStream(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) throw Error(fmt::format("cannot open '{}'", path));
    gzbuffer(file_, 1 << 20);
    size_ = static_cast<double>(fs::file_size(path));
  }
  ~GzipStream() override { gzclose(file_); }
  std::size_t read(char* buffer, std::size_t size) override {
    int got = gzread(file_, buffer, static_cast<unsigned>(size));
    if (got < 0) {
      int code = 0;
      throw Error(fmt::format("corrupt compressed corpus: {}", gzerror(file_, &code)));
    }
    return static_cast<std::size_t>(got);
  }
  double progress() const override { return std::min(1.0, static_cast<double>(gzoffset(file_)) / size_); }

 private:
  gzFile file_;
  double size_ = 1;
};

class CommandStream : public TextStream {
 public:
  CommandStream(const std::string& command, double expected_bytes)
      : pipe_(popen(command.c_str(), "r")), expected_(expected_bytes) {
    if (pipe_ == nullptr) throw Error(fmt::format("cannot run '{}'", command));
  }
  ~CommandStream() override { pclose(pipe_); }
  std::size_t read(char* buffer, std::size_t size) override {
    std::size_t got = fread(buffer, 1, size, pipe_);
    done_ += static_cast<double>(got);
    return got;
  }
  double progress() const override { return std::min(1.0, done_ / expected_); }

 private:
  FILE* pipe_;
  double expected_, done_ = 0;
};

class FilesStream : public TextStream {
 public:
  explicit FilesStream(std::vector<std::string> files) : files_(std::move(files)) {
    for (const std::string& file : files_) total_ += static_cast<double>(fs::file_size(file));
  }
  std::size_t read(char* buffer, std::size_t size) override {
    while (true) {
      if (!current_.is_open()) {
        if (next_ >= files_.size()) return 0;
        current_.open(files_[next_++], std::ios::binary);
        if (!current_) throw Error(fmt::format("cannot read '{}'", files_[next_ - 1]));
      }
      current_.read(buffer, static_cast<std::streamsize>(size));
      auto got = static_cast<std::size_t>(current_.gcount());
      if (got > 0) {
        done_ += static_cast<double>(got);
        return got;
      }
      current_.close();
    }
  }
  double progress() const override { return total_ > 0 ? done_ / total_ : 1.0; }

 private:
  std::vector<std::string> files_;
  std::size_t next_ = 0;
  std::ifstream current_;
  double total_ = 0, done_ = 0;
};

void require_package(const CorpusInfo& info, const std::string& check_path) {
  if (!fs::exists(check_path)) {
    throw UsageError(
        with_hint(fmt::format("corpus '{}' is not installed ({} not found)", info.name, check_path),
                  fmt::format("install it with `apt-get install {}` (bash scripts/setup does)", info.package)));
  }
}

}  // namespace

const std::vector<CorpusInfo>& corpora_builtin() {
  static const std::vector<CorpusInfo> corpora = {
      {"gcide", "GNU Collaborative International Dictionary of English (~40 MB text)", "/usr/share/dictd/gcide.dict.dz",
       "dict-gcide"},
      {"kjv", "King James Version of the Bible (~4.4 MB text)", "/usr/lib/bible.data", "bible-kjv"},
      {"pydoc", "Python 3.11 documentation, reST sources (~10 MB text)", "/usr/share/doc/python3.11/html/_sources",
       "python3.11-doc"},
      // Held out: no shipped experiment trains on these two (tfw eval --corpus).
      {"jargon", "The Jargon File 4.4.7, hacker slang with essays (~1.7 MB text; held out)",
       "/usr/share/doc/jargon-text/jargon.txt.gz", "jargon-text"},
      {"fortunes", "fortune cookies: quotations, jokes and verse (~2.6 MB text; held out)", "/usr/share/games/fortunes",
       "fortunes"},
  };
  return corpora;
}

void corpus_check(const std::string& name_or_path) {
  for (const CorpusInfo& info : corpora_builtin()) {
    if (info.name != name_or_path) continue;
    require_package(info, info.path);
    if (info.name == "kjv") require_package(info, "/usr/bin/bible");
    return;
  }
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return;
  if (fs::is_directory(name_or_path, ec)) {
    for (const auto& entry : fs::recursive_directory_iterator(name_or_path, ec)) {
      if (entry.is_regular_file()) return;
    }
    throw UsageError(fmt::format("corpus folder '{}' has no files", name_or_path));
  }
  corpus_open(name_or_path);  // throws the "unknown corpus" error, with the built-in names
}

std::unique_ptr<TextStream> corpus_open(const std::string& name_or_path, CorpusInfo* info_out) {
  for (const CorpusInfo& info : corpora_builtin()) {
    if (info.name != name_or_path) continue;
    if (info_out) *info_out = info;
    require_package(info, info.path);
    if (info.name == "gcide" || info.name == "jargon") return std::make_unique<GzipStream>(info.path);
    if (info.name == "kjv") {
      require_package(info, "/usr/bin/bible");
      return std::make_unique<CommandStream>(kBibleCommand, kBibleBytes);
    }
    // pydoc: the .txt reST sources; fortunes: the cookie files (no extension: not the .dat
    // indexes or the .u8 links).
    const std::string wanted = info.name == "fortunes" ? "" : ".txt";
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(info.path)) {
      if (entry.is_regular_file() && entry.path().extension() == wanted) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return std::make_unique<FilesStream>(std::move(files));
  }
  std::error_code ec;
  if (fs::exists(name_or_path, ec)) confine_check(name_or_path, "data.corpus");
  if (fs::is_regular_file(name_or_path, ec)) {
    if (info_out) *info_out = {fs::path(name_or_path).filename(), "text file", name_or_path, ""};
    return std::make_unique<FilesStream>(std::vector<std::string>{name_or_path});
  }
  if (fs::is_directory(name_or_path, ec)) {
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(name_or_path)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) throw UsageError(fmt::format("corpus folder '{}' has no files", name_or_path));
    if (info_out) *info_out = {fs::path(name_or_path).filename(), "text folder", name_or_path, ""};
    return std::make_unique<FilesStream>(std::move(files));
  }
  std::vector<std::string> names;
  for (const CorpusInfo& info : corpora_builtin()) names.push_back(info.name);
  throw UsageError(with_hint(
      fmt::format("unknown corpus '{}': not a built-in name, file or folder", name_or_path),
      fmt::format("built-in corpora: {}; or give the path of a text file or folder", fmt::join(names, ", "))));
}

}  // namespace tfw
