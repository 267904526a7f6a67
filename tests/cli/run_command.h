// Runs shell commands for the end-to-end tests: output and exit code.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

namespace tfw::test {

struct Result {
  int code;
  std::string output;  // everything the command wrote: its stdout, then its stderr (for messages)
  std::string out;     // its stdout alone: parse this (JSON, CSV, numbers), never `output`
  std::string err;     // its stderr alone
};

// Runs `command` with /bin/sh and collects its stdout and stderr apart, so that a note on
// stderr (progress, "other processes used N% of the CPUs" on a busy machine) never lands
// inside what a test parses. `with_stderr = false` discards stderr instead.
inline Result capture(const std::string& command, bool with_stderr = true) {
  Result run{-1, "", "", ""};
  char err_path[] = "/tmp/tfw-test-stderr-XXXXXX";
  const int err_fd = with_stderr ? mkstemp(err_path) : -1;
  if (with_stderr && err_fd < 0) return run;
  if (err_fd >= 0) close(err_fd);
  // A brace group, so that a command ending in `;` or `&` or holding its own redirections works.
  const std::string wrapped = "{ " + command + "\n} 2>" + (with_stderr ? std::string(err_path) : "/dev/null");
  FILE* pipe = popen(wrapped.c_str(), "r");
  if (pipe == nullptr) {
    if (with_stderr) unlink(err_path);
    return run;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (with_stderr) {
    std::ifstream in(err_path, std::ios::binary);
    run.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    unlink(err_path);
  }
  run.output = run.out + run.err;
  return run;
}

// The last val/loss the trainer wrote to a run folder's metrics.jsonl (9 significant digits).
inline double trainer_val_loss(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  double loss = std::nan("");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json point = nlohmann::json::parse(line);
    if (point["key"] == "val/loss") loss = point["value"].get<double>();
  }
  return loss;
}

}  // namespace tfw::test
