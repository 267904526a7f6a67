// A run is trained by one process at a time. The process that trains (or deletes) a run holds
// an exclusive lock on RUN_DIR/.lock (flock: released when the process ends, however it ends,
// so a killed run never leaves a stale lock). A second resume of the run, a `tfw runs delete`
// of it, or a second batch that reaches the same run is refused while it is held, naming the
// process that holds it. Torch-free.
#pragma once

#include <memory>
#include <string>

namespace tfw::runner {

class RunLock {
 public:
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Holds the lock of `run_dir` (created when missing), or throws UsageError naming `what` (the
  // run, as the user knows it) and the process that holds it.
  static std::unique_ptr<RunLock> hold(const std::string& run_dir, const std::string& what);

  // The process that holds `run_dir`'s lock now ("pid 1234"), or "" when none does. For a
  // batch, which waits for a run that another process trains instead of failing it.
  static std::string holder(const std::string& run_dir);

 private:
  explicit RunLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace tfw::runner
