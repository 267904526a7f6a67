// The Tokenformer module tree. Parameter names: embedding, layers.<i>.{q,k,v,o,ffn}.{keys,values},
// final_norm.{weight,bias} (and layers.<i>.{attn_norm,ffn_norm} when layernorm.affine).
#include "engine/nn/decoder.h"
#include "plugins/tokenformer/tokenformer.h"

namespace tfw::tokenformer {

namespace {

class Block : public DecoderBlock {
 public:
  Block(const TokenformerSpec& spec, std::int64_t index)
      : heads_(spec.heads), layers_(pattention_block_layers(*this, spec, index)) {}

  // x (B, T, d) -> (B, T, d)
  torch::Tensor forward(const torch::Tensor& x, const RotaryTable& rotary) override {
    PattentionBlockLayers& l = layers_;
    torch::Tensor h = l.attn_norm(x);                                                       // (B, T, d)
    torch::Tensor a = multi_head_causal_attention(l.q(h), l.k(h), l.v(h), heads_, rotary);  // (B, T, d)
    torch::Tensor y = x + l.o(a);                                                           // (B, T, d)
    return y + l.ffn(l.ffn_norm(y));
  }

 private:
  std::int64_t heads_;
  PattentionBlockLayers layers_;
};

}  // namespace

std::shared_ptr<LanguageModel> tokenformer_build(const TokenformerSpec& spec) {
  const DecoderOptions options = decoder_options(spec, spec.embedding_std, spec.d / spec.heads);
  auto model = std::make_shared<TiedDecoderLM>(options);
  for (std::int64_t i = 0; i < spec.layers; ++i) model->add_block(std::make_shared<Block>(spec, i));
  return model;
}

}  // namespace tfw::tokenformer
