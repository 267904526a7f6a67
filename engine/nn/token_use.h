// Growth diagnostics: does a grown model use the parameter tokens growth appended?
// For each Pattention layer holding more tokens than it was created with (n > n0: tokens
// n0..n-1 were appended), over every validation batch the trainer evaluates:
//   appended_mass    the share of the score mass Σ|Θ(S)| (over input tokens and parameter
//                    tokens) that falls on the appended tokens; with n0 old and m new tokens
//                    used alike it is m / n, and 0 when the new tokens are never used;
//   appended_active  the share of appended tokens that some input token activates with
//                    |Θ(S)| above kTokenUseThreshold times the mean |Θ(S)| of the old tokens;
//   key_norm_old/new, value_norm_old/new   the mean L2 norm of the old and the appended rows
//                    of the keys and of the values.
// Metrics "token_use/<layer>/<name>" (layer "layers.3.q"), and "token_use/appended_mass" and
// "token_use/appended_active": the means over the layers. A layer under a parameter mask
// (train.mask) is left out: its scores cover only the tokens in use. With several ranks
// (`--nproc`), each validates its share of the batches and rank 0 records: the diagnostics are
// of rank 0's share (not all-reduced), while val/loss is of every rank's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/plugin/task.h"

namespace tfw {

inline constexpr double kTokenUseThreshold = 0.1;

class TokenUseMeter {
 public:
  explicit TokenUseMeter(Model& model);
  bool empty() const { return layers_.empty(); }  // no layer has appended tokens
  // The sink of a ScoreCapture alive while the model evaluates.
  ScoreCapture::Sink sink();
  // The statistics of what the sink saw (nothing for a layer it never saw).
  std::vector<Metric> metrics() const;

 private:
  struct Layer {
    PattentionImpl* module = nullptr;
    std::int64_t n = 0, n0 = 0;
    // Sums of |Θ(S)| over what the sink saw, float64 scalars on the scores' device (read once,
    // in metrics(): adding a batch never waits for the device).
    torch::Tensor old_sum, appended_sum;
    double old_count = 0;
    torch::Tensor appended_max;  // (n - n0) float64 on the scores' device: the largest |Θ(S)| per appended token
  };
  void add(Layer& layer, const torch::Tensor& scores);
  std::map<std::string, Layer> layers_;
};

}  // namespace tfw
