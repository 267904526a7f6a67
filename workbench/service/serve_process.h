// A real `tfw serve` as a child process, for the service's tests, its benchmark and anyone
// who needs a service beside them: started through the runner's process supervision on the
// address its arguments give (port 0: a free one, read from its "listening on" line), and
// stopped with SIGTERM (it finishes cleanly) or killed.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/process.h"

namespace tfw::service {

class ServeProcess {
 public:
  // Starts `TFW serve ARGUMENTS...` and waits (up to `seconds`) for its first line of output.
  ServeProcess(const std::string& tfw, const std::vector<std::string>& arguments, double seconds = 60) {
    char folder[] = "/tmp/tfw-serve-XXXXXX";
    if (mkdtemp(folder) == nullptr) return;
    folder_ = folder;
    ProcessSpec spec;
    spec.argv = {tfw, "serve"};
    spec.argv.insert(spec.argv.end(), arguments.begin(), arguments.end());
    spec.log_path = folder_ + "/serve.log";
    spec.own_group = false;  // stop() signals the service itself, which stops its runs
    process_ = Process::spawn(spec);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(spec.log_path);
      std::stringstream text;
      text << in.rdbuf();
      const std::string log = text.str();
      if (log.find('\n') != std::string::npos) {
        first_line_ = log.substr(0, log.find('\n') + 1);
        const std::string marker = "listening on ";
        if (const auto at = log.find(marker); at != std::string::npos) {
          const std::string rest = log.substr(at + marker.size());
          address_ = rest.substr(0, rest.find_first_of(" \n"));
        }
        break;
      }
      if (process_.poll()) break;  // it ended without a line
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ServeProcess() {
    stop();
    std::error_code ignored;
    if (!folder_.empty()) std::filesystem::remove_all(folder_, ignored);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  ServeProcess(ServeProcess&& other) noexcept
      : process_(other.process_),
        folder_(std::move(other.folder_)),
        first_line_(std::move(other.first_line_)),
        address_(std::move(other.address_)) {
    other.process_ = Process();
    other.folder_.clear();
  }

  const std::string& address() const { return address_; }  // "" when it did not start
  const std::string& first_line() const { return first_line_; }
  pid_t pid() const { return process_.pid(); }

  // Sends `signal` and waits for the end; its exit code (128 + N for signal N), -1 if none ran.
  int stop(int signal = SIGTERM) {
    if (process_.pid() <= 0) return -1;
    process_.signal(signal);
    const int code = process_.wait();
    process_ = Process();
    return code;
  }

 private:
  Process process_;
  std::string folder_, first_line_, address_;
};

}  // namespace tfw::service
