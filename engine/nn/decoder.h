// The skeleton both model families share: token embedding E (V, d) -> pre-norm blocks ->
// final affine LayerNorm -> logits h·Eᵀ (tied, no extra scale). A family supplies the
// blocks; comparisons then differ only in the blocks' projections.
// Shapes: B batch, T length, d width, V vocabulary.
#pragma once

#include <memory>

#include "engine/nn/attention.h"
#include "engine/nn/model.h"

namespace tfw {

class DecoderBlock : public torch::nn::Module {
 public:
  // x (B, T, d) -> (B, T, d)
  virtual torch::Tensor forward(const torch::Tensor& x, const RotaryTable& rotary) = 0;
};

// What both language-model families' specs share (tokenformer, transformer): the sizes, the
// context, the rotary embedding and the final norm's eps, and what follows from them.
struct DecoderSpec : ModelSpec {
  std::int64_t layers = 0, d = 0, heads = 0, vocab = 0, seq_len = 1024;
  double rotary_pct = 0.25, rotary_base = 10000.0;
  double layernorm_eps = 1e-5;

  ModelShape shape() const override { return {layers, d, heads, vocab, seq_len}; }
  std::int64_t embedding_parameter_count() const override { return vocab * d; }  // tied to the logits
};

// Reads the [model] table's layers, d and heads into `spec`.
void decoder_sizes_parse(ConfigTable& table, DecoderSpec& spec);
// Reads vocab, seq_len (default 1024), rotary_pct (in [0, 1], default 0.25) and rotary_base
// (default 10000).
void decoder_context_parse(ConfigTable& table, DecoderSpec& spec);

struct DecoderOptions {
  std::int64_t vocab = 0, d = 0;
  double embedding_std = 0.02;
  double final_norm_eps = 1e-5;
  std::int64_t rotary_dims = 0;  // per head, even
  double rotary_base = 10000.0;
};

// A family's DecoderOptions from its spec's vocab, d, layernorm_eps, rotary_pct and rotary_base
// (the keys tokenformer and transformer share), its embedding std and its head width.
template <class Spec>
DecoderOptions decoder_options(const Spec& spec, double embedding_std, std::int64_t head_dim) {
  DecoderOptions options;
  options.vocab = spec.vocab;
  options.d = spec.d;
  options.embedding_std = embedding_std;
  options.final_norm_eps = spec.layernorm_eps;
  options.rotary_dims = rotary_dims(head_dim, spec.rotary_pct);
  options.rotary_base = spec.rotary_base;
  return options;
}

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
  torch::Tensor embedding_;  // (V, d)
  torch::nn::ModuleList layers_{nullptr};
  torch::nn::LayerNorm final_norm_{nullptr};
};

}  // namespace tfw
