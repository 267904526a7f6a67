#include "workbench/cli/output.h"

#include "engine/plugin/registry.h"

#include <signal.h>

#include <csignal>

#include <filesystem>
#include <iostream>

namespace tfw::cli {

void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << "\n"; }

StopSignals::StopSignals(void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

std::string paper_results_default() {
  const std::string beside = executable_dir() + "/../assets/paper_results.toml";
  if (std::filesystem::exists(beside)) return beside;
  return std::string(TFW_ASSETS_DIR) + "/paper_results.toml";
}

}  // namespace tfw::cli
