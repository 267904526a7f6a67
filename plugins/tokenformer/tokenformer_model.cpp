// The Tokenformer module tree. Parameter names: embedding, layers.<i>.{q,k,v,o,ffn}.{keys,values},
// final_norm.{weight,bias} (and layers.<i>.{attn_norm,ffn_norm} when layernorm.affine).
#include <fmt/format.h>

#include "engine/nn/decoder.h"
#include "plugins/tokenformer/tokenformer.h"

namespace tfw::tokenformer {

namespace {

class Block : public DecoderBlock {
 public:
  Block(const TokenformerSpec& spec, std::int64_t index) : heads_(spec.heads) {
    auto norm_options =
        torch::nn::LayerNormOptions({spec.d}).elementwise_affine(spec.layernorm_affine).eps(spec.layernorm_eps);
    attn_norm_ = register_module("attn_norm", torch::nn::LayerNorm(norm_options));
    ffn_norm_ = register_module("ffn_norm", torch::nn::LayerNorm(norm_options));
    auto make = [&](const char* name, std::int64_t tokens) {
      auto options = PattentionOptions(spec.d, spec.d, tokens)
                         .norm(spec.norm)
                         .tau_mode(spec.tau)
                         .eps(spec.pattention_eps)
                         .key_std(spec.key_std)
                         .value_std(spec.value_init_std())
                         .label(fmt::format("layers.{}.{}", index, name));
      return register_module(name, Pattention(options));
    };
    q_ = make("q", spec.n_attn);
    k_ = make("k", spec.n_attn);
    v_ = make("v", spec.n_attn);
    o_ = make("o", spec.n_attn);
    ffn_ = make("ffn", spec.n_ffn);
  }

  // x (B, T, d) -> (B, T, d)
  torch::Tensor forward(const torch::Tensor& x, const RotaryTable& rotary) override {
    torch::Tensor h = attn_norm_(x);                                                     // (B, T, d)
    torch::Tensor a = multi_head_causal_attention(q_(h), k_(h), v_(h), heads_, rotary);  // (B, T, d)
    torch::Tensor y = x + o_(a);                                                         // (B, T, d)
    return y + ffn_(ffn_norm_(y));
  }

 private:
  std::int64_t heads_;
  torch::nn::LayerNorm attn_norm_{nullptr}, ffn_norm_{nullptr};
  Pattention q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr}, ffn_{nullptr};
};

}  // namespace

std::shared_ptr<LanguageModel> tokenformer_build(const TokenformerSpec& spec) {
  const DecoderOptions options = decoder_options(spec, spec.embedding_std, spec.d / spec.heads);
  auto model = std::make_shared<TiedDecoderLM>(options);
  for (std::int64_t i = 0; i < spec.layers; ++i) model->add_block(std::make_shared<Block>(spec, i));
  return model;
}

}  // namespace tfw::tokenformer
