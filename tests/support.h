// Helpers shared by the test suites: a registry loaded from the build's plugin folder,
// configs from TOML text, float64 comparisons.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include "engine/nn/libtorch.h"

#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"

namespace tfw::test {

// The in-tree plugins of this build (build/plugins), loaded once.
const Registry& plugins();

// Parses TOML text as a model config file named `name`.
ModelConfig config_from_text(const std::string& text, const std::string& name = "test.toml");

// A model config file of the repository, e.g. "experiments/paper/tokenformer-150m.toml".
ModelConfig config_from_repo(const std::string& relative_path);

// A tiny model's config file as TOML text: `family` with two layers of width `d`, `heads`
// heads and `vocab` symbols; for tokenformer, `n_attn` and `n_ffn` parameter tokens; the
// context `seq_len` when it is not 0. `more` follows: more [model] keys, then sections.
struct TinyModel {
  std::string family;
  int d = 16, heads = 2, vocab = 30, n_attn = 0, n_ffn = 0, seq_len = 0;
  std::string toml(const std::string& more = "") const;
};

// A TOML table as JSON (tables, integers, floats, booleans, strings), for reference scripts.
nlohmann::json toml_to_json(const toml::table& table);

// The float64 reference scripts (tests/reference/NAME.py DIR), run with the venv's python
// (TFW_PYTHON). python_reference_inputs writes DIR/meta.json (`meta`, plus "params": the name
// and shape of each of `model`'s parameters) and DIR/weights.bin (those parameters, float64,
// in that order). python_references then runs the script over every folder in one Python
// process (tests/reference/run_many.py: each start imports PyTorch, about 2 s) and returns,
// in order, the float64 values each run wrote to DIR/reference.bin. A failing script is a
// test failure and empty results.
void python_reference_inputs(const std::string& dir, nlohmann::json meta, torch::nn::Module& model);
std::vector<std::vector<double>> python_references(const std::string& script, const std::vector<std::string>& dirs);
// python_references over the folders of `cases` (each with a `label` and a `dir`), then
// `check(case, its reference)` for each, under its label; an empty reference fails the case.
template <typename Case, typename Check>
void check_references(const std::string& script, const std::vector<Case>& cases, Check check) {
  std::vector<std::string> dirs;
  for (const Case& c : cases) dirs.push_back(c.dir);
  const std::vector<std::vector<double>> references = python_references(script, dirs);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].label);
    ASSERT_FALSE(references[i].empty());
    check(cases[i], references[i]);
  }
}

// Checks a float64 forward and backward against a reference script's output (python_references):
// the logits within 1e-10, the loss within 1e-12, then each of `model`'s parameter gradients
// within 1e-10, in that order, and that nothing is left over.
void expect_matches_reference(const std::vector<double>& reference, const torch::Tensor& logits,
                              const torch::Tensor& loss, torch::nn::Module& model);

// The message of the UsageError `body` throws; a test failure, and "", when it throws none.
std::string usage_error(const std::function<void()>& body);

// Largest absolute elementwise difference.
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);

// Two torch threads or more for the life of the object, then the count before it: the fused
// kernels split their rows between threads (at::parallel_for), which the suite's one thread a
// test (tests/one_thread.cpp) would otherwise leave untested. Loads plugins() first, whose
// runtime_init() would set the count again.
class TwoThreads {
 public:
  TwoThreads();
  ~TwoThreads();
  TwoThreads(const TwoThreads&) = delete;
  TwoThreads& operator=(const TwoThreads&) = delete;

 private:
  int before_ = 1;
};

}  // namespace tfw::test
