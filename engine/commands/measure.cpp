#include "engine/commands/measure.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/nn/model.h"
#include "engine/plugin/registry.h"

namespace tfw {

ForwardTiming forward_timing(const Registry& registry, const ModelConfig& config, std::int64_t seq_len,
                             std::int64_t batch, int repeats) {
  // Timed at several lengths: a language model's (an image classifier's length is fixed).
  std::shared_ptr<LanguageModel> model =
      as_language_model(registry.family(config.family).build(*config.spec, 0), "tfw flops --measure");
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::randint(config.spec->shape().vocab, {batch, seq_len}, torch::kInt64);  // (B, T)
  model->forward(ids);                                                                              // warm-up
  std::vector<double> times;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    auto start = std::chrono::steady_clock::now();
    model->forward(ids);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  ForwardTiming timing;
  timing.seq_len = seq_len;
  timing.seconds_per_token = times[times.size() / 2] / static_cast<double>(batch * seq_len);
  timing.flops_per_second =
      static_cast<double>(config.spec->flops_per_token(seq_len).forward()) / timing.seconds_per_token;
  return timing;
}

}  // namespace tfw
