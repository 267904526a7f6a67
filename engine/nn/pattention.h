// Pattention: token-parameter attention, the layer Tokenformer uses in place of every
// linear projection (docs/design/TOKENFORMER.md §1). Input tokens attend to n learnable parameter
// tokens: S = X·Kᵀ, A = Θ(S) normalised along the parameter-token axis, O = A·V.
//
// Shapes: X (..., d_in), K (n, d_in), V (n, d_out), S and A (..., n), O (..., d_out).
// tau and n0 (the token count at creation) are buffers, saved with the layer and NOT
// recomputed when tokens are appended (tau_mode fixed), so that appending zero keys
// leaves the output unchanged exactly. tau_mode sqrt_n recomputes from the current n,
// as the authors' code does.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "engine/nn/libtorch.h"

#include "engine/core/config_table.h"
#include "engine/nn/pattention_norm.h"  // PattentionNorm, TauMode, pattention_scores_normalise

namespace tfw {

// A family's [model.pattention] table: the score norm, the tau mode and eps (tokenformer,
// vision_tokenformer; docs/configs.md).
struct PattentionSettings {
  PattentionNorm norm = PattentionNorm::l2_gelu;
  TauMode tau = TauMode::fixed;
  double eps = 1e-6;
};
PattentionSettings pattention_settings_parse(ConfigTable& table);  // the caller calls finish()
toml::table pattention_settings_toml(const PattentionSettings& settings);

// Reads the [layernorm] and [pattention] sub-tables of a Pattention family's [model] table
// (both finished) into `spec`'s layernorm_affine, layernorm_eps, norm, tau and pattention_eps:
// the block settings tokenformer and vision_tokenformer share.
template <class Spec>
void pattention_blocks_parse(ConfigTable& model, Spec& spec) {
  ConfigTable layernorm = model.sub("layernorm");
  spec.layernorm_affine = layernorm.get_bool("affine", false);
  spec.layernorm_eps = layernorm.get_positive("eps", 1e-5);
  layernorm.finish();
  ConfigTable pattention = model.sub("pattention");
  const PattentionSettings settings = pattention_settings_parse(pattention);
  pattention.finish();
  spec.norm = settings.norm;
  spec.tau = settings.tau;
  spec.pattention_eps = settings.eps;
}

struct PattentionOptions {
  PattentionOptions(std::int64_t d_in, std::int64_t d_out, std::int64_t tokens)
      : d_in_(d_in), d_out_(d_out), tokens_(tokens) {}
  TORCH_ARG(std::int64_t, d_in);
  TORCH_ARG(std::int64_t, d_out);
  TORCH_ARG(std::int64_t, tokens);  // n0
  TORCH_ARG(PattentionNorm, norm) = PattentionNorm::l2_gelu;
  TORCH_ARG(TauMode, tau_mode) = TauMode::fixed;
  TORCH_ARG(double, eps) = 1e-6;
  TORCH_ARG(double, key_std) = 0.02;
  TORCH_ARG(double, value_std) = 0.02;
  TORCH_ARG(std::string, label) = "";  // e.g. "layers.3.q", the name score capture uses
};

class PattentionImpl : public torch::nn::Module {
 public:
  explicit PattentionImpl(PattentionOptions options);
  void reset();
  void reset_parameters();

  // x (..., d_in) -> (..., d_out)
  torch::Tensor forward(const torch::Tensor& x);

  // Appends m parameter tokens: new_keys (m, d_in), new_values (m, d_out). The registered
  // parameters keep their identity (set_data), so optimisers and hooks still see them.
  void append_tokens(const torch::Tensor& new_keys, const torch::Tensor& new_values);

  std::int64_t tokens() const { return keys.size(0); }
  // A parameter mask (engine/nn/mask.h): only these tokens (int64 indices, increasing, on the
  // parameters' device) take part: the others add nothing to the output or to Θ's row
  // statistics, and get a zero gradient. An undefined tensor (the default) uses every token.
  void set_active_tokens(torch::Tensor indices) { active_ = std::move(indices); }
  const torch::Tensor& active_tokens() const { return active_; }
  // The tokens taking part: tokens(), or the active ones' count.
  std::int64_t tokens_in_use() const { return active_.defined() ? active_.size(0) : tokens(); }
  std::int64_t tokens_at_creation() const { return n0.item<std::int64_t>(); }
  // The multiplier Θ uses now: tau for the L2 variants, n for the L1 variants.
  torch::Tensor multiplier() const;
  double multiplier_value() const;  // the same, as a number
  const PattentionOptions& options() const { return options_; }
  void set_label(std::string label) { options_.label(std::move(label)); }
  // Growth into a config with another pattention.tau (the buffers are the caller's to set).
  void set_tau_mode(TauMode mode) { options_.tau_mode(mode); }

  torch::Tensor keys;    // (n, d_in)
  torch::Tensor values;  // (n, d_out)
  torch::Tensor tau;     // () float64 buffer: sqrt(n0) at creation
  torch::Tensor n0;      // () int64 buffer

 private:
  PattentionOptions options_;
  torch::Tensor active_;
};
TORCH_MODULE(Pattention);

// A Pattention of a Pattention family's spec (tokenformer, vision_tokenformer): d_in -> d_out
// with `tokens` parameter tokens and the spec's norm, tau, eps and initialisation.
template <class Spec>
PattentionOptions pattention_options(const Spec& spec, std::int64_t d_in, std::int64_t d_out, std::int64_t tokens,
                                     std::string label) {
  return PattentionOptions(d_in, d_out, tokens)
      .norm(spec.norm)
      .tau_mode(spec.tau)
      .eps(spec.pattention_eps)
      .key_std(spec.key_std)
      .value_std(spec.value_init_std())
      .label(std::move(label));
}

// The layers of a Tokenformer block, which tokenformer and vision_tokenformer share: two
// LayerNorms (affine as the spec says) and five d -> d Pattentions, registered on `block` in
// this order as attn_norm, ffn_norm, q, k, v, o and ffn (the checkpoint's names), each
// Pattention labelled "layers.<index>.<name>" for score capture.
struct PattentionBlockLayers {
  torch::nn::LayerNorm attn_norm{nullptr}, ffn_norm{nullptr};
  Pattention q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr}, ffn{nullptr};
};

template <class Spec>
PattentionBlockLayers pattention_block_layers(torch::nn::Module& block, const Spec& spec, std::int64_t index) {
  const auto norm =
      torch::nn::LayerNormOptions({spec.d}).elementwise_affine(spec.layernorm_affine).eps(spec.layernorm_eps);
  PattentionBlockLayers layers;
  layers.attn_norm = block.register_module("attn_norm", torch::nn::LayerNorm(norm));
  layers.ffn_norm = block.register_module("ffn_norm", torch::nn::LayerNorm(norm));
  auto make = [&](const char* name, std::int64_t tokens) {
    const std::string label = "layers." + std::to_string(index) + "." + name;
    return block.register_module(name, Pattention(pattention_options(spec, spec.d, spec.d, tokens, label)));
  };
  layers.q = make("q", spec.n_attn);
  layers.k = make("k", spec.n_attn);
  layers.v = make("v", spec.n_attn);
  layers.o = make("o", spec.n_attn);
  layers.ffn = make("ffn", spec.n_ffn);
  return layers;
}

// Captures Θ(S) of Pattention layers during a forward pass on this thread. While a
// ScoreCapture is alive, every Pattention whose label passes the filter stores its
// scores (detached) under its label. With no capture alive the cost is one pointer test.
class ScoreCapture {
 public:
  // An empty filter captures every layer; otherwise only labels in it.
  explicit ScoreCapture(std::vector<std::string> labels = {});
  // Hands each layer's scores (not detached, not copied) to `sink` instead of keeping them:
  // for statistics over many batches without holding every batch's scores.
  using Sink = std::function<void(const std::string& label, const torch::Tensor& scores)>;
  explicit ScoreCapture(Sink sink);
  ~ScoreCapture();
  ScoreCapture(const ScoreCapture&) = delete;
  ScoreCapture& operator=(const ScoreCapture&) = delete;

  const std::map<std::string, torch::Tensor>& scores() const { return scores_; }

  // Called by Pattention::forward; public for layers of plugins.
  static ScoreCapture* active();
  void record(const std::string& label, const torch::Tensor& scores);

 private:
  std::vector<std::string> labels_;
  Sink sink_;
  std::map<std::string, torch::Tensor> scores_;
  ScoreCapture* previous_;
};

}  // namespace tfw
