// Runs shell commands for the end-to-end tests: output and exit code.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace tfw::test {

struct Result {
  int code;
  std::string output;  // stdout, and stderr too unless asked otherwise
};

inline Result capture(const std::string& command, bool with_stderr = true) {
  FILE* pipe = popen((command + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  Result run{-1, ""};
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) run.output += buffer.data();
  int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
