// A home that several tests read, trained once per suite run and shared. ctest runs every
// test case as its own process, so a suite that trained in SetUpTestSuite trained once per
// case. Instead, the first process to ask runs the recipe into a cache folder beside the
// build, under a lock, and every process (that one too) gets its own copy of the finished
// home to work in. A home keeps its paths relative to itself (docs/store.md), so a copy is
// whole. Training is deterministic for a config and seed, so the shared result is the one
// each case computed before. The cache is keyed by the recipe and by the build (the times of
// tfw, tfw-torch, the core and engine libraries and the plugins): a rebuild trains again.
#pragma once

#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "tests/cli/run_command.h"

namespace tfw::test {

// Fills `home` (replaced) with what `recipe` leaves in the home it is given. The recipe is a
// shell script in which $H is the home; it must exit 0. Returns "" or what went wrong (the
// recipe's output), for an ASSERT.
inline std::string trained_home(const std::string& recipe, const std::string& home) {
  namespace fs = std::filesystem;
  const fs::path build = fs::path(TFW_BINARY).parent_path();
  std::string key = recipe;
  std::error_code ignored;
  auto stamp = [&](const fs::path& file) {
    const auto time = fs::last_write_time(file, ignored);
    key += "|" + file.string() + "@" + std::to_string(time.time_since_epoch().count());
  };
  stamp(TFW_BINARY);
  stamp(build / "tfw-torch");  // what trains, grows and evaluates (tfw hands those lines to it)
  stamp(build / "lib" / "libtfw_core.so");
  stamp(build / "lib" / "libtfw_engine.so");
  for (const auto& plugin : fs::directory_iterator(build / "plugins", ignored)) stamp(plugin.path());
  const fs::path cache = build / "test-cache" / std::to_string(std::hash<std::string>{}(key));
  fs::create_directories(cache.parent_path());
  // One process trains; the others wait here for it (flock is released when a process dies).
  const int lock = ::open((cache.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return "cannot open the cache lock beside " + cache.string();
  ::flock(lock, LOCK_EX);
  std::string failure;
  const fs::path done = cache / ".trained";
  if (!fs::exists(done)) {
    fs::remove_all(cache, ignored);
    fs::create_directories(cache);
    std::ofstream(cache.string() + ".sh") << "H=" << cache.string() << "\n" << recipe << "\n";
    const Result run = capture("bash " + cache.string() + ".sh");
    if (run.code != 0) {
      failure = "the shared training failed (exit " + std::to_string(run.code) + "):\n" + run.output;
      fs::remove_all(cache, ignored);
    } else {
      std::ofstream(done) << recipe << "\n";
    }
  }
  if (failure.empty()) {
    fs::remove_all(home, ignored);
    fs::create_directories(fs::path(home).parent_path(), ignored);
    const Result copied = capture("cp -a " + cache.string() + " " + home + " && rm " + home + "/.trained");
    if (copied.code != 0) failure = "cannot copy the shared home: " + copied.output;
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return failure;
}

}  // namespace tfw::test
