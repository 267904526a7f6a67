// The skeleton both model families share: token embedding E (V, d) -> pre-norm blocks ->
// final affine LayerNorm -> logits h·Eᵀ (tied, no extra scale). A family supplies the
// blocks; comparisons then differ only in the blocks' projections.
// Shapes: B batch, T length, d width, V vocabulary.
#pragma once

#include <memory>

#include "engine/attention.h"
#include "engine/model.h"

namespace tfw {

class DecoderBlock : public torch::nn::Module {
 public:
  // x (B, T, d) -> (B, T, d)
  virtual torch::Tensor forward(const torch::Tensor& x, const RotaryTable& rotary) = 0;
};

struct DecoderOptions {
  std::int64_t vocab = 0, d = 0;
  double embedding_std = 0.02;
  double final_norm_eps = 1e-5;
  std::int64_t rotary_dims = 0;  // per head, even
  double rotary_base = 10000.0;
};

class TiedDecoderLM : public LanguageModel {
 public:
  explicit TiedDecoderLM(const DecoderOptions& options);
  // Registered as layers.<i>.
  void add_block(std::shared_ptr<DecoderBlock> block);

  torch::Tensor hidden(const torch::Tensor& ids) override;
  torch::Tensor forward(const torch::Tensor& ids) override;
  torch::Tensor forward_cached(const torch::Tensor& ids, KVCache& cache) override;
  torch::Tensor token_embedding() override { return embedding_; }

 protected:
  // Hooks for a family that transforms the embedded tokens or the final norm (the
  // Transformer's msg growth masks new dimensions): x (B, T, d) -> (B, T, d).
  virtual torch::Tensor after_embedding(const torch::Tensor& x) { return x; }
  virtual torch::Tensor final_normed(const torch::Tensor& x) { return final_norm_(x); }
  torch::nn::LayerNorm& final_norm() { return final_norm_; }

 private:
  DecoderOptions options_;
  torch::Tensor embedding_;                    // (V, d)
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::LayerNorm final_norm_{nullptr};
};

}  // namespace tfw
