// The baseline Transformer module tree. Parameter names: embedding,
// layers.<i>.{attn_norm,q,k,v,o,ffn_norm,ffn_up,ffn_down}.{weight[,bias]}, final_norm.
#include <cmath>

#include "engine/decoder.h"
#include "plugins/transformer/transformer.h"

namespace tfw::transformer {

namespace {

class Block : public DecoderBlock {
 public:
  explicit Block(const TransformerSpec& spec) : heads_(spec.heads) {
    auto norm_options = torch::nn::LayerNormOptions({spec.d}).eps(spec.layernorm_eps);
    attn_norm_ = register_module("attn_norm", torch::nn::LayerNorm(norm_options));
    ffn_norm_ = register_module("ffn_norm", torch::nn::LayerNorm(norm_options));
    const double out_std = spec.init_std / std::sqrt(2.0 * static_cast<double>(spec.layers));
    auto make = [&](const char* name, std::int64_t in, std::int64_t out, double std) {
      auto linear = register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(spec.bias)));
      torch::NoGradGuard no_grad;
      linear->weight.normal_(0.0, std);
      if (spec.bias) linear->bias.zero_();
      return linear;
    };
    q_ = make("q", spec.d, spec.d_attn(), spec.init_std);
    k_ = make("k", spec.d, spec.d_attn(), spec.init_std);
    v_ = make("v", spec.d, spec.d_attn(), spec.init_std);
    o_ = make("o", spec.d_attn(), spec.d, out_std);
    ffn_up_ = make("ffn_up", spec.d, spec.d_ffn, spec.init_std);
    ffn_down_ = make("ffn_down", spec.d_ffn, spec.d, out_std);
  }

  // x (B, T, d) -> (B, T, d)
  torch::Tensor forward(const torch::Tensor& x, const RotaryTable& rotary) override {
    torch::Tensor h = attn_norm_(x);                                                    // (B, T, d)
    torch::Tensor a = multi_head_causal_attention(q_(h), k_(h), v_(h), heads_, rotary); // (B, T, H·dh)
    torch::Tensor y = x + o_(a);                                                        // (B, T, d)
    return y + ffn_down_(torch::gelu(ffn_up_(ffn_norm_(y))));                           // (B, T, d)
  }

 private:
  std::int64_t heads_;
  torch::nn::LayerNorm attn_norm_{nullptr}, ffn_norm_{nullptr};
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr}, ffn_up_{nullptr},
      ffn_down_{nullptr};
};

}  // namespace

std::shared_ptr<LanguageModel> transformer_build(const TransformerSpec& spec) {
  DecoderOptions options;
  options.vocab = spec.vocab;
  options.d = spec.d;
  options.embedding_std = spec.init_std;
  options.final_norm_eps = spec.layernorm_eps;
  options.rotary_dims = rotary_dims(spec.head_dim, spec.rotary_pct);
  options.rotary_base = spec.rotary_base;
  auto model = std::make_shared<TiedDecoderLM>(options);
  for (std::int64_t i = 0; i < spec.layers; ++i) model->add_block(std::make_shared<Block>(spec));
  return model;
}

}  // namespace tfw::transformer
