// The Tokenformer language model (docs/design/TOKENFORMER.md §2): every projection is a Pattention,
// per-layer LayerNorms have no parameters, the final LayerNorm is affine, logits are tied
// to the embedding, partial rotary on 25% of each head's dims.
// Shapes: B batch, T length, d width, H heads, dh = d / H, V vocabulary.
#pragma once

#include <memory>
#include <string>

#include "engine/nn/decoder.h"
#include "engine/nn/pattention.h"
#include "engine/plugin/plugin_api.h"

namespace tfw::tokenformer {

struct TokenformerSpec : DecoderSpec {
  std::int64_t n_attn = 0, n_ffn = 0;
  bool layernorm_affine = false;
  PattentionNorm norm = PattentionNorm::l2_gelu;
  TauMode tau = TauMode::fixed;
  double pattention_eps = 1e-6;
  double key_std = 0.02, value_std = 0.0, embedding_std = 0.02;  // value_std 0: 2/(L·sqrt(d))

  std::string family() const override { return "tokenformer"; }
  std::int64_t parameter_count() const override;
  FlopsPerToken flops_per_token(std::int64_t T) const override;
  toml::table to_toml() const override;
  std::string summary() const override;
  double value_init_std() const;
};

std::shared_ptr<LanguageModel> tokenformer_build(const TokenformerSpec& spec);

}  // namespace tfw::tokenformer
