// Helpers shared by the test suites: a registry loaded from the build's plugin folder,
// configs from TOML text, float64 comparisons.
#pragma once

#include <string>

#include <torch/torch.h>

#include "engine/registry.h"
#include "engine/run_config.h"

namespace tfw::test {

// The in-tree plugins of this build (build/plugins), loaded once.
const Registry& plugins();

// Parses TOML text as a model config file named `name`.
ModelConfig config_from_text(const std::string& text, const std::string& name = "test.toml");

// A model config file of the repository, e.g. "experiments/paper/tokenformer-150m.toml".
ModelConfig config_from_repo(const std::string& relative_path);

// Largest absolute elementwise difference.
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace tfw::test
