// The language-model interface every model family plugin implements. Shapes: B batch,
// T sequence length, d width, V vocabulary.
#pragma once

#include <torch/torch.h>

namespace tfw {

class LanguageModel : public torch::nn::Module {
 public:
  // ids (B, T) int64 -> logits (B, T, V).
  virtual torch::Tensor forward(const torch::Tensor& ids) = 0;
  // ids (B, T) -> the final-normed hidden states (B, T, d) the logits are read from.
  virtual torch::Tensor hidden(const torch::Tensor& ids) = 0;
  // The token embedding E (V, d); the logits are hidden · Eᵀ (tied).
  virtual torch::Tensor token_embedding() = 0;
};

}  // namespace tfw
