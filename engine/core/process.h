// Process supervision, the one place that forks: start `tfw` (or any program) as a child in
// its own process group with its output in a log file, signal the group, and reap it.
// The local executor (executor_local.h) runs every training and growth step through it.
// docs/design/ARCHITECTURE.md, "The runner".
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tfw {

struct ProcessSpec {
  std::vector<std::string> argv;         // argv[0] is the program's path
  std::string log_path;                  // stdout and stderr, appended ("" keeps ours)
  std::string error_path;                // stderr alone, when set (appended)
  std::string cwd;                       // "" keeps ours
  std::vector<std::string> environment;  // NAME=VALUE set in the child (over ours)
  bool own_group = true;                 // its own process group: signal() reaches its children too
  bool die_with_parent = true;           // SIGTERM when the thread that started it ends (PR_SET_PDEATHSIG)
};

// This executable's path. If it was rebuilt while it runs, /proc/self/exe reads
// "... (deleted)": the path then names the new build, which is the one to run.
std::string self_executable();

// Replaces this process with the program at `path`, given `argv` as its arguments (argv[0]
// included, as given). Returns only when that fails, with errno saying why.
void process_become(const std::string& path, char** argv);

// Replaces this process with itself, the same arguments, and NAME=VALUE in its environment
// (for settings a library reads only as it loads, e.g. OMP_WAIT_POLICY). Returns only when
// that fails, and the caller goes on as it is.
void process_restart_with(const std::string& name, const std::string& value, char** argv);

// The path of `program` found on $PATH (as a shell would), or "" when there is none.
std::string program_path(const std::string& program);

// A short command run to its end (sbatch, squeue, scancel, ...): exit code and output.
struct CommandOutput {
  int code = -1;  // 127: it could not be run (not found)
  std::string out, err;
};
CommandOutput command_run(const std::vector<std::string>& argv, const std::vector<std::string>& environment = {});

class Process {
 public:
  // Starts the child; throws tfw::Error when fork fails. Exec failures show as exit 127.
  static Process spawn(const ProcessSpec& spec);
  Process() = default;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !code_; }
  // Sends `signal` to the child's process group (or to the child without one).
  void signal(int signal_number) const;
  // Reaps the child if it has ended: its exit code (128 + N for signal N), else nothing.
  std::optional<int> poll();
  // Waits for the end (retrying on EINTR); returns the exit code.
  int wait();

 private:
  pid_t pid_ = 0;
  bool group_ = false;
  std::optional<int> code_;
};

}  // namespace tfw
