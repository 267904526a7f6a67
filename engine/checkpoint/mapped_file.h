// A read-only mapping of a whole checkpoint or weights file: pages are read only when touched.
// Torch-free (libtfw_core): the metadata of a checkpoint is read without LibTorch.
#pragma once

#include <cstddef>
#include <string>

namespace tfw {

class MappedFile {
 public:
  // UsageError where the file cannot be opened or is not a regular file.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tfw
