// A run's time on a GPU, from what finished runs measured: the tokens/s that finished runs of
// the same model, batch, device and precision reached on a GPU (their median). `tfw run
// --dry-run` estimates a GPU experiment's runs with it, and `tfw report` the units an
// experiment has still to run; neither guesses a time that no run has measured. Torch-free.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "storage/store.h"

namespace tfw::results {

// What sets a run's pace on a GPU, from a resolved config (planned or stored): its family and
// model (sizes, vocabulary, length), batch, gradient accumulation, device and precision.
std::string pace_key(const toml::table& config);

class GpuPaces {
 public:
  // A finished run's tokens/s, when it trained on a GPU and recorded them; others are passed over.
  void add(const RunRecord& record);
  // The time `tokens` take with `config`, at the median tokens/s of the runs that measured it;
  // NaN when none did. `runs` (when given) is how many did.
  double seconds(const toml::table& config, double tokens, std::size_t* runs = nullptr) const;

 private:
  std::map<std::string, std::vector<double>> rates_;  // pace key -> each run's tokens/s
};

}  // namespace tfw::results
