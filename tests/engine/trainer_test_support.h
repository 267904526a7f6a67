// The helpers of the trainer's tests (test_trainer.cpp, test_online_growth.cpp): both
// families' tiny configs on kjv, run folders in one shared TFW_HOME, stopping a run as Ctrl-C
// would and resuming it, the metrics a run logged, and a fixed thread count for bit-exact runs.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "engine/core/config_table.h"
#include "engine/config/run_config.h"
#include "engine/train/trainer.h"
#include "tests/support.h"

namespace tfw::trainer_test {

namespace fs = std::filesystem;

// The data and training settings of both families' tiny configs.
inline const char* const kTraining = R"([data]
corpus = "kjv"
[train]
batch_size = 8
lr = 3e-3
warmup_steps = 10
eval_every = 25
eval_batches = 4
checkpoint_every = 25
peak_flops = 1e11
)";

inline const std::string kTokenformer = test::TinyModel{"tokenformer", 32, 4, 256, 32, 64, 32}.toml(kTraining);

inline const std::string kTransformer = test::TinyModel{"transformer", 32, 4, 256, 0, 0, 32}.toml(kTraining);

// A shared TFW_HOME so kjv is prepared once; each test gets its own run folder.
inline std::string home() {
  static const std::string path = [] {
    fs::path dir = fs::temp_directory_path() / "tfw-test-trainer-home";
    fs::create_directories(dir);
    return dir.string();
  }();
  return path;
}

inline RunConfig config_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  toml::table table = toml::parse(std::string_view(text), std::string_view("trainer-test.toml"));
  config_apply_overrides(table, overrides);
  return run_config_parse(test::plugins(), table, "trainer-test.toml");
}

inline TrainOptions options_for(const std::string& run) {
  TrainOptions options;
  options.home = home();
  options.run_dir = (fs::path(home()) / "runs" / run).string();
  fs::remove_all(options.run_dir);
  fs::create_directories(options.run_dir);
  return options;
}

// Asks the run to stop once it has trained `step` steps (as Ctrl-C would).
class StopAt : public RunObserver {
 public:
  StopAt(std::atomic<bool>& stop, std::int64_t step) : stop_(stop), step_(step) {}
  void progress(const TrainProgress& p) override {
    if (p.step == step_) stop_ = true;
  }

 private:
  std::atomic<bool>& stop_;
  std::int64_t step_;
};

// Trains until `step` steps are done, then stops as Ctrl-C would (a checkpoint, interrupted).
inline TrainSummary train_until(const RunConfig& config, TrainOptions& options, std::int64_t step) {
  std::atomic<bool> stop{false};
  StopAt stopper(stop, step);
  options.stop = &stop;
  options.observer = &stopper;
  TrainSummary summary = train_run(test::plugins(), config, options);
  options.stop = nullptr;
  options.observer = nullptr;
  return summary;
}

// The options that resume a stopped run in its folder.
inline TrainOptions resuming(TrainOptions options) {
  options.resume = true;
  return options;
}

// The values a run logged under `key` (metrics.jsonl), in order; null is NaN.
inline std::vector<double> logged(const std::string& run_dir, const std::string& key) {
  std::vector<double> values;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  const std::string needle = "\"key\":\"" + key + "\",\"value\":";
  while (std::getline(in, line)) {
    auto at = line.find(needle);
    if (at == std::string::npos) continue;
    const std::string value = line.substr(at + needle.size());
    values.push_back(value.rfind("null", 0) == 0 ? std::nan("") : std::stod(value));
  }
  return values;
}

// Bit-for-bit equality needs the same thread count throughout (a different split of a
// matmul's reduction rounds differently): on a busy machine the thread governor would change
// it, so these tests hold it fixed, as TFW_FIXED_THREADS=1 does for users.
inline void hold_threads_fixed() { setenv("TFW_FIXED_THREADS", "1", 1); }

}  // namespace tfw::trainer_test
