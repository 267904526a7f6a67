// The baseline Transformer module tree. Parameter names: embedding,
// layers.<i>.{attn_norm,q,k,v,o,ffn_norm,ffn_up,ffn_down}.{weight[,bias]}, final_norm. A model
// grown by msg has the same parameters, and masks computed from its [model.msg] ramp.
#include <algorithm>
#include <cmath>

#include "engine/nn/decoder.h"
#include "plugins/transformer/transformer.h"

namespace tfw::transformer {

namespace {

// msg's masks at the model's current step, in the activations' dtype and device: 1 for the
// structures the model had before the growth, c(step) for the new ones. Undefined tensors
// where that size did not grow, or once c = 1 (the plain model).
struct MsgMasks {
  double c = 1.0;
  torch::Tensor d, attn, ffn;  // (d), (H·dh), (d_ffn)
};

torch::Tensor ramp_mask(std::int64_t old_size, std::int64_t size, double c, const torch::TensorOptions& options) {
  return torch::cat({torch::ones({old_size}, options), torch::full({size - old_size}, c, options)});
}

// LayerNorm whose statistics weigh each dimension by w (1 old, c new) and whose output is
// multiplied by w: at c = 0 the old dimensions are normalised as before the growth and the
// new ones are 0; at c = 1 it is the plain LayerNorm.
torch::Tensor masked_layer_norm(const torch::Tensor& x, const torch::Tensor& w, torch::nn::LayerNorm& norm) {
  const torch::Tensor total = w.sum();
  const torch::Tensor mean = (x * w).sum(-1, true) / total;                // (B, T, 1)
  const torch::Tensor centred = x - mean;                                  // (B, T, d)
  const torch::Tensor var = (centred.square() * w).sum(-1, true) / total;  // (B, T, 1)
  torch::Tensor y = centred * torch::rsqrt(var + norm->options.eps());
  if (norm->options.elementwise_affine()) y = y * norm->weight + norm->bias;
  return y * w;
}

class Block : public DecoderBlock {
 public:
  Block(const TransformerSpec& spec, std::int64_t index, std::shared_ptr<const MsgMasks> masks)
      : heads_(spec.heads), masks_(std::move(masks)) {
    is_new_ = std::find(spec.msg.new_layers.begin(), spec.msg.new_layers.end(), index) != spec.msg.new_layers.end();
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
    if (masks_ == nullptr || masks_->c >= 1.0) {
      torch::Tensor h = attn_norm_(x);                                                     // (B, T, d)
      torch::Tensor a = multi_head_causal_attention(q_(h), k_(h), v_(h), heads_, rotary);  // (B, T, H·dh)
      torch::Tensor y = x + o_(a);                                                         // (B, T, d)
      return y + ffn_down_(torch::gelu(ffn_up_(ffn_norm_(y))));                            // (B, T, d)
    }
    // During msg's ramp (the rules of MSG's released code, docs/growth.md): new hidden dims are
    // masked in every LayerNorm (statistics weighted by the mask, output multiplied by it) and
    // in each branch's output; new heads in their q, k and v; new FFN neurons before the GELU
    // (GELU(0) = 0); a new layer as a whole, x + c·(block(x) - x).
    const MsgMasks& m = *masks_;
    auto norm = [&](torch::nn::LayerNorm& ln, const torch::Tensor& t) {
      return m.d.defined() ? masked_layer_norm(t, m.d, ln) : ln(t);
    };
    auto heads = [&](torch::Tensor t) { return m.attn.defined() ? t * m.attn : t; };
    auto stream = [&](torch::Tensor t) { return m.d.defined() ? t * m.d : t; };
    torch::Tensor h = norm(attn_norm_, x);  // (B, T, d)
    torch::Tensor a = multi_head_causal_attention(heads(q_(h)), heads(k_(h)), heads(v_(h)), heads_, rotary);
    torch::Tensor y = x + stream(o_(a));            // (B, T, d)
    torch::Tensor u = ffn_up_(norm(ffn_norm_, y));  // (B, T, d_ffn)
    if (m.ffn.defined()) u = u * m.ffn;
    torch::Tensor out = y + stream(ffn_down_(torch::gelu(u)));  // (B, T, d)
    return is_new_ ? x + m.c * (out - x) : out;
  }

 private:
  std::int64_t heads_;
  std::shared_ptr<const MsgMasks> masks_;  // null: no msg growth in this model
  bool is_new_ = false;
  torch::nn::LayerNorm attn_norm_{nullptr}, ffn_norm_{nullptr};
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr}, ffn_up_{nullptr}, ffn_down_{nullptr};
};

// A Transformer during (or after) an msg growth: the decoder with masked new dimensions in
// the embedding and the final norm, and c(step) from the trainer's step.
class MsgDecoderLM : public TiedDecoderLM {
 public:
  MsgDecoderLM(const DecoderOptions& options, const TransformerSpec& spec)
      : TiedDecoderLM(options), spec_(spec), masks_(std::make_shared<MsgMasks>()) {
    masks_->c = spec_.msg.value(0);
  }
  std::shared_ptr<const MsgMasks> masks() const { return masks_; }
  void set_training_step(std::int64_t step) override { masks_->c = spec_.msg.value(step); }

 protected:
  torch::Tensor after_embedding(const torch::Tensor& x) override {
    MsgMasks& m = *masks_;
    const auto options = x.options();
    const MsgRamp& r = spec_.msg;
    auto make = [&](std::int64_t old_size, std::int64_t size) {
      return m.c >= 1.0 || old_size == size ? torch::Tensor() : ramp_mask(old_size, size, m.c, options);
    };
    m.d = make(r.d, spec_.d);
    m.attn = make(r.heads * spec_.head_dim, spec_.d_attn());
    m.ffn = make(r.d_ffn, spec_.d_ffn);
    return m.d.defined() ? x * m.d : x;
  }
  torch::Tensor final_normed(const torch::Tensor& x) override {
    return masks_->d.defined() ? masked_layer_norm(x, masks_->d, final_norm()) : final_norm()(x);
  }

 private:
  TransformerSpec spec_;
  std::shared_ptr<MsgMasks> masks_;
};

}  // namespace

std::shared_ptr<LanguageModel> transformer_build(const TransformerSpec& spec) {
  const DecoderOptions options = decoder_options(spec, spec.init_std, spec.head_dim);
  if (spec.msg.on) {
    auto model = std::make_shared<MsgDecoderLM>(options, spec);
    for (std::int64_t i = 0; i < spec.layers; ++i) model->add_block(std::make_shared<Block>(spec, i, model->masks()));
    return model;
  }
  auto model = std::make_shared<TiedDecoderLM>(options);
  for (std::int64_t i = 0; i < spec.layers; ++i) model->add_block(std::make_shared<Block>(spec, i, nullptr));
  return model;
}

}  // namespace tfw::transformer
