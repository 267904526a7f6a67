// See run_lock.h.
#include "runner/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw::runner {

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

std::unique_ptr<RunLock> RunLock::hold(const std::string& run_dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  const std::string path = run_dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    throw Error(fmt::format("cannot open the lock of run {} ({}): {}", what, path, std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {0};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    const std::string pid = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : std::string("?");
    throw UsageError(with_hint(fmt::format("run {} is held by another tfw process (pid {}), which is training or "
                                           "deleting it; nothing was done",
                                           what, pid.substr(0, pid.find('\n'))),
                               "wait for that process to end, or stop it (Ctrl-C; `tfw cancel` for a job)"));
  }
  const std::string mine = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd, mine.data(), mine.size(), 0);
  }
  return std::unique_ptr<RunLock>(new RunLock(fd));
}

std::string RunLock::holder(const std::string& run_dir) {
  const std::string path = run_dir + "/.lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";  // never locked
  std::string who;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    char text[32] = {0};
    const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
    const std::string pid = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string("?");
    who = "pid " + pid.substr(0, pid.find('\n'));
  }
  ::close(fd);  // a shared lock taken here ends with the descriptor
  return who;
}

}  // namespace tfw::runner
