// JSON printing and stop signals for the subcommands; the number formatting lives in workbench/common/format.h
// (shared with the GUI) and is found from tfw::cli unqualified.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "workbench/common/format.h"

namespace tfw::cli {

void print_json(const nlohmann::json& value);

// The paper's numbers (assets/paper_results.toml): beside the build (build/../assets), or, for
// a build folder outside the checkout (TFW_BUILD_DIR), in the checkout it was built from.
std::string paper_results_default();

// While it lives, SIGINT and SIGTERM call `handler` (without SA_RESTART, so that a wait is cut
// short); then they are back to their defaults, also when the command throws.
class StopSignals {
 public:
  explicit StopSignals(void (*handler)(int));
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

}  // namespace tfw::cli
