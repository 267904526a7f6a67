// The baseline Transformer LM (docs/design/TOKENFORMER.md §3): the Tokenformer's skeleton with linear
// Q/K/V/O projections, a d -> d_ffn -> d GELU FFN and affine LayerNorms, so comparisons
// isolate the token-parameter layer. Attention width H·dh may differ from d (head growth).
// Shapes: B batch, T length, d width, H heads, dh head width, V vocabulary.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/nn/decoder.h"
#include "engine/plugin/plugin_api.h"

namespace tfw::transformer {

// Masked Structural Growth's state (docs/growth.md, "msg"): which structures of the model are
// new since a growth, and the ramp of their mask, c(step) = clamp((step - start_step) /
// ramp_steps, 0, 1). The hidden dims [d, spec d), the heads [heads, spec heads), the FFN
// neurons [d_ffn, spec d_ffn) and the layers in new_layers are multiplied by c; at c = 0 the
// model computes what the model before the growth computed, at c = 1 a plain Transformer of
// the spec's size. Kept in the config ([model.msg]), so checkpoints and resumes carry it.
struct MsgRamp {
  bool on = false;
  std::int64_t start_step = 0, ramp_steps = 1;
  std::int64_t d = 0, heads = 0, d_ffn = 0;  // the sizes before the growth
  std::vector<std::int64_t> new_layers;      // indices in the grown model
  double value(std::int64_t step) const;     // c(step)
};

struct TransformerSpec : DecoderSpec {
  std::int64_t head_dim = 0, d_ffn = 0;
  bool bias = false;
  double init_std = 0.02;
  MsgRamp msg;

  std::int64_t d_attn() const { return heads * head_dim; }
  std::string family() const override { return "transformer"; }
  std::int64_t parameter_count() const override;
  FlopsPerToken flops_per_token(std::int64_t T) const override;
  toml::table to_toml() const override;
  std::string summary() const override;
};

std::shared_ptr<LanguageModel> transformer_build(const TransformerSpec& spec);

// The `msg` growth method (msg.cpp), registered by this plugin.
std::shared_ptr<const GrowthMethod> msg_method();

}  // namespace tfw::transformer
