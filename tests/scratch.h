// Scratch folders for the tests, torch-free (the storage, runner and service suites use it):
// a folder under the system's temporary directory, emptied and created again.
#pragma once

#include <filesystem>
#include <string>

namespace tfw::test {

// TMPDIR/tfw-test-`name`, empty.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tfw-test-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The path of a store that does not exist yet, in an empty fresh_dir(`name`).
inline std::string fresh_store(const std::string& name) { return (fresh_dir(name) / "runs.db").string(); }

}  // namespace tfw::test
