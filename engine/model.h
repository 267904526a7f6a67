// The language-model interface every model family plugin implements. Shapes: B batch,
// T sequence length, d width, V vocabulary.
#pragma once

#include <torch/torch.h>

namespace tfw {

struct KVCache;  // engine/attention.h

class LanguageModel : public torch::nn::Module {
 public:
  // ids (B, T) int64 -> logits (B, T, V).
  virtual torch::Tensor forward(const torch::Tensor& ids) = 0;
  // ids (B, T) -> the final-normed hidden states (B, T, d) the logits are read from.
  virtual torch::Tensor hidden(const torch::Tensor& ids) = 0;
  // The token embedding E (V, d); the logits are hidden · Eᵀ (tied).
  virtual torch::Tensor token_embedding() = 0;
  // Generation a token at a time: the logits (B, T, V) of `ids` (B, T), the positions that
  // follow the cache's, whose keys and values it then holds too. A family without a cache
  // returns an undefined tensor (the default), and the caller runs forward() on the whole
  // sequence instead.
  virtual torch::Tensor forward_cached(const torch::Tensor& ids, KVCache& cache) {
    (void)ids;
    (void)cache;
    return {};
  }
  // The training step the model computes at: the trainer sets it before every step and every
  // evaluation, checkpoint_load sets the checkpoint's step. A model whose function depends on
  // it (msg's masks ramping from 0 to 1, docs/growth.md) reads it; the rest ignore it.
  virtual void set_training_step(std::int64_t step) { (void)step; }
};

}  // namespace tfw
