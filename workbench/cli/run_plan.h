// The plan `tfw run --dry-run` prints (docs/experiments.md): each run with its parent, size,
// tokens, FLOPs and an estimated time, then the file's units with theirs. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "engine/config/experiment.h"

namespace tfw::cli {

// `runs` are the selected runs (all, --only's or --unit's); `problems` what keeps runs from
// starting, printed after the plan.
void print_plan(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs, const std::string& home,
                bool json, const std::vector<std::string>& problems);

}  // namespace tfw::cli
