// Text corpora, read as a stream in constant memory. Built in, from Debian packages:
// `gcide` (dict-gcide), `kjv` (bible-kjv), `pydoc` (python3.11-doc reST sources), and two
// that no shipped experiment trains on, as held-out text for `tfw eval`: `jargon`
// (jargon-text) and `fortunes` (fortunes). Any other
// name is a path to a text file or a folder (read recursively, files in sorted order).
// Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfw {

struct CorpusInfo {
  std::string name;
  std::string description;
  std::string path;     // what is read
  std::string package;  // the Debian package that provides it ("" for user paths)
};

const std::vector<CorpusInfo>& corpora_builtin();

class TextStream {
 public:
  virtual ~TextStream() = default;
  // Reads up to `size` bytes into `buffer`; 0 at the end.
  virtual std::size_t read(char* buffer, std::size_t size) = 0;
  // Progress in [0, 1] (by input consumed), for the progress line.
  virtual double progress() const = 0;
};

// Opens a built-in corpus by name or a user's file/folder. Throws UsageError saying which
// package or path is missing and how to get it.
std::unique_ptr<TextStream> corpus_open(const std::string& name_or_path, CorpusInfo* info = nullptr);

// What corpus_open would say before it reads anything: the same UsageError for an unknown name,
// a missing package or an empty folder, without opening a file. For checks before compute
// (a run's start, `tfw run --dry-run`).
void corpus_check(const std::string& name_or_path);

}  // namespace tfw
