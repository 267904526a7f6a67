// The Tokenformer language model (docs/design/TOKENFORMER.md §2): every projection is a Pattention,
// per-layer LayerNorms have no parameters, the final LayerNorm is affine, logits are tied
// to the embedding, partial rotary on 25% of each head's dims.
// Shapes: B batch, T length, d width, H heads, dh = d / H, V vocabulary.
#pragma once

#include <memory>
#include <string>

#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/plugin/plugin_api.h"

namespace tfw::tokenformer {

struct TokenformerSpec : ModelSpec {
  std::int64_t layers = 0, d = 0, heads = 0, n_attn = 0, n_ffn = 0, vocab = 0, seq_len = 1024;
  double rotary_pct = 0.25, rotary_base = 10000.0;
  bool layernorm_affine = false;
  double layernorm_eps = 1e-5;
  PattentionNorm norm = PattentionNorm::l2_gelu;
  TauMode tau = TauMode::fixed;
  double pattention_eps = 1e-6;
  double key_std = 0.02, value_std = 0.0, embedding_std = 0.02;  // value_std 0: 2/(L·sqrt(d))

  std::string family() const override { return "tokenformer"; }
  ModelShape shape() const override { return {layers, d, heads, vocab, seq_len}; }
  std::int64_t parameter_count() const override;
  std::int64_t embedding_parameter_count() const override { return vocab * d; }
  FlopsPerToken flops_per_token(std::int64_t T) const override;
  toml::table to_toml() const override;
  std::string summary() const override;
  double value_init_std() const;
};

std::shared_ptr<LanguageModel> tokenformer_build(const TokenformerSpec& spec);

}  // namespace tfw::tokenformer
