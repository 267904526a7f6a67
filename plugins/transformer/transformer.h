// The baseline Transformer LM (docs/design/TOKENFORMER.md §3): the Tokenformer's skeleton with linear
// Q/K/V/O projections, a d -> d_ffn -> d GELU FFN and affine LayerNorms, so comparisons
// isolate the token-parameter layer. Attention width H·dh may differ from d (head growth).
// Shapes: B batch, T length, d width, H heads, dh head width, V vocabulary.
#pragma once

#include <memory>
#include <string>

#include "engine/model.h"
#include "engine/plugin_api.h"

namespace tfw::transformer {

struct TransformerSpec : ModelSpec {
  std::int64_t layers = 0, d = 0, heads = 0, head_dim = 0, d_ffn = 0, vocab = 0, seq_len = 1024;
  double rotary_pct = 0.25, rotary_base = 10000.0;
  double layernorm_eps = 1e-5;
  bool bias = false;
  double init_std = 0.02;

  std::int64_t d_attn() const { return heads * head_dim; }
  std::string family() const override { return "transformer"; }
  ModelShape shape() const override { return {layers, d, heads, vocab, seq_len}; }
  std::int64_t parameter_count() const override;
  std::int64_t embedding_parameter_count() const override { return vocab * d; }
  FlopsPerToken flops_per_token(std::int64_t T) const override;
  toml::table to_toml() const override;
  std::string summary() const override;
};

std::shared_ptr<LanguageModel> transformer_build(const TransformerSpec& spec);

}  // namespace tfw::transformer
