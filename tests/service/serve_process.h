// A real `tfw serve` child process for the service tests and benchmark: started on a free
// loopback port (read from its "listening on" line), stopped with SIGTERM or killed.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace tfw::test {

class ServeProcess {
 public:
  explicit ServeProcess(const std::string& tfw, const std::vector<std::string>& arguments) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      std::vector<std::string> args = {tfw, "serve"};
      args.insert(args.end(), arguments.begin(), arguments.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    FILE* stream = fdopen(out[0], "r");
    char line[512] = {0};
    if (stream && fgets(line, sizeof(line), stream)) first_line_ = line;
    if (stream) fclose(stream);
    const std::string marker = "listening on ";
    const auto at = first_line_.find(marker);
    if (at != std::string::npos) {
      const std::string rest = first_line_.substr(at + marker.size());
      address_ = rest.substr(0, rest.find(' '));
    }
  }
  ~ServeProcess() { stop(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  ServeProcess(ServeProcess&& other) noexcept
      : pid_(other.pid_), first_line_(std::move(other.first_line_)), address_(std::move(other.address_)) {
    other.pid_ = 0;
  }

  const std::string& address() const { return address_; }  // "" when it did not start
  const std::string& first_line() const { return first_line_; }
  pid_t pid() const { return pid_; }

  int stop(int signal = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = 0;
  std::string first_line_, address_;
};

}  // namespace tfw::test
