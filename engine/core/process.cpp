// See process.h.
#include "engine/core/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "engine/core/error.h"

extern char** environ;

namespace tfw {

namespace fs = std::filesystem;

std::string self_executable() {
  std::string exe = fs::read_symlink("/proc/self/exe").string();
  const std::string deleted = " (deleted)";
  if (exe.size() > deleted.size() && exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0) {
    exe.erase(exe.size() - deleted.size());
  }
  return exe;
}

void process_become(const std::string& path, char** argv) { ::execv(path.c_str(), argv); }

void process_restart_with(const std::string& name, const std::string& value, char** argv) {
  ::setenv(name.c_str(), value.c_str(), 1);
  process_become(self_executable(), argv);
}

std::string program_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::string folders = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= folders.size();) {
    std::size_t end = folders.find(':', start);
    if (end == std::string::npos) end = folders.size();
    const std::string folder = end > start ? folders.substr(start, end - start) : ".";
    const std::string candidate = folder + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

namespace {

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

Process Process::spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw Error("process spawn: no program given");
  // Everything the child needs is built before fork: between fork and exec a threaded
  // process may only call async-signal-safe functions (no malloc, no setenv).
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::set<std::string> overridden;
  for (const std::string& e : spec.environment) overridden.insert(e.substr(0, e.find('=')));
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr || !overridden.count(std::string(static_cast<const char*>(*e), eq))) environment.emplace_back(*e);
  }
  environment.insert(environment.end(), spec.environment.begin(), spec.environment.end());
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    if (spec.own_group) setpgid(0, 0);
    if (spec.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(130);  // the parent died before prctl
    }
    // Signals blocked or ignored by the parent's threads are not the child's business.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) _exit(126);
    if (!spec.log_path.empty()) {
      const int out = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (out >= 0) {
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
      }
    }
    if (!spec.error_path.empty()) {
      const int err = ::open(spec.error_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (err >= 0) dup2(err, STDERR_FILENO);
    }
    // The child gets stdin, stdout and stderr, nothing else: no descriptor this process
    // inherited or opened (a test runner's log, a store's WAL, a socket) stays open in it.
    close_range(3, ~0U, 0);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) throw Error(fmt::format("cannot start {}: fork failed: {}", spec.argv[0], std::strerror(errno)));
  if (spec.own_group) setpgid(pid, pid);  // also from here: no race with an early signal()
  Process process;
  process.pid_ = pid;
  process.group_ = spec.own_group;
  return process;
}

CommandOutput command_run(const std::vector<std::string>& argv, const std::vector<std::string>& environment) {
  CommandOutput result;
  if (argv.empty()) return result;
  std::string program = program_path(argv.front());
  if (program.empty()) {
    result.code = 127;
    result.err = fmt::format("{}: command not found", argv.front());
    return result;
  }
  char out_template[] = "/tmp/tfw-command-out-XXXXXX";
  char err_template[] = "/tmp/tfw-command-err-XXXXXX";
  const int out_fd = mkstemp(out_template), err_fd = mkstemp(err_template);
  if (out_fd < 0 || err_fd < 0) throw Error(fmt::format("cannot create a temporary file to run {}", argv.front()));
  ::close(out_fd);
  ::close(err_fd);
  ProcessSpec spec;
  spec.argv = argv;
  spec.argv.front() = program;
  spec.log_path = out_template;
  spec.error_path = err_template;
  spec.environment = environment;
  spec.own_group = false;
  Process process = Process::spawn(spec);
  result.code = process.wait();
  auto slurp = [](const char* path) {
    std::string text;
    if (FILE* file = std::fopen(path, "r")) {
      char buffer[4096];
      std::size_t n = 0;
      while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
      std::fclose(file);
    }
    ::unlink(path);
    return text;
  };
  result.out = slurp(out_template);
  result.err = slurp(err_template);
  return result;
}

void Process::signal(int signal_number) const {
  if (pid_ <= 0 || code_) return;
  ::kill(group_ ? -pid_ : pid_, signal_number);
}

std::optional<int> Process::poll() {
  if (code_ || pid_ <= 0) return code_;
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == pid_) code_ = exit_code_of(status);
  return code_;
}

int Process::wait() {
  if (code_ || pid_ <= 0) return code_.value_or(-1);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  code_ = exit_code_of(status);
  return *code_;
}

}  // namespace tfw
