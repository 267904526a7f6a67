// The `vit` and `vision_tokenformer` module trees (docs/design/VISION.md). Parameter names:
// patch_embed.{weight,bias} (or .{keys,values}), cls_token, position, layers.<i>.{attn_norm,
// q, k, v, o, ffn_norm, ffn_up, ffn_down} (ViT) or layers.<i>.{q,k,v,o,ffn}.{keys,values}
// (Tokenformer), final_norm.{weight,bias}, head.{weight,bias} (or .{keys,values}).
#include <cmath>

#include "engine/nn/attention.h"
#include "plugins/vision/vision.h"

namespace tfw::vision {

namespace {

// images (B, C, H, W) -> patches (B, rows·cols, C·P·P), row-major over the grid, each patch's
// pixels in (channel, row, column) order.
torch::Tensor patchify(const torch::Tensor& images, std::int64_t P) {
  const std::int64_t B = images.size(0), C = images.size(1), H = images.size(2), W = images.size(3);
  return images.reshape({B, C, H / P, P, W / P, P})
      .permute({0, 2, 4, 1, 3, 5})  // (B, rows, cols, C, P, P)
      .reshape({B, (H / P) * (W / P), C * P * P});
}

// A block's projection d_in -> d_out: a linear layer (ViT) or a Pattention (Tokenformer).
using Projection = std::function<torch::Tensor(const torch::Tensor&)>;

class Block : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;  // (B, T, d) -> (B, T, d)
};

class VitBlock : public Block {
 public:
  VitBlock(const VitSpec& spec) : heads_(spec.heads) {
    auto norm_options = torch::nn::LayerNormOptions({spec.d}).eps(spec.layernorm_eps);
    attn_norm_ = register_module("attn_norm", torch::nn::LayerNorm(norm_options));
    ffn_norm_ = register_module("ffn_norm", torch::nn::LayerNorm(norm_options));
    const double out_std = spec.init_std / std::sqrt(2.0 * static_cast<double>(spec.layers));
    auto make = [&](const char* name, std::int64_t in, std::int64_t out, double std) {
      auto linear = register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out)));
      torch::NoGradGuard no_grad;
      linear->weight.normal_(0.0, std);
      linear->bias.zero_();
      return linear;
    };
    q_ = make("q", spec.d, spec.d, spec.init_std);
    k_ = make("k", spec.d, spec.d, spec.init_std);
    v_ = make("v", spec.d, spec.d, spec.init_std);
    o_ = make("o", spec.d, spec.d, out_std);
    ffn_up_ = make("ffn_up", spec.d, spec.d_ffn, spec.init_std);
    ffn_down_ = make("ffn_down", spec.d_ffn, spec.d, out_std);
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    const torch::Tensor h = attn_norm_(x);  // (B, T, d)
    const torch::Tensor y = x + o_(multi_head_attention(q_(h), k_(h), v_(h), heads_));
    return y + ffn_down_(torch::gelu(ffn_up_(ffn_norm_(y))));  // (B, T, d)
  }

 private:
  std::int64_t heads_;
  torch::nn::LayerNorm attn_norm_{nullptr}, ffn_norm_{nullptr};
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr}, ffn_up_{nullptr}, ffn_down_{nullptr};
};

class TokenformerBlock : public Block {
 public:
  TokenformerBlock(const VisionTokenformerSpec& spec, std::int64_t index)
      : heads_(spec.heads), layers_(pattention_block_layers(*this, spec, index)) {}

  torch::Tensor forward(const torch::Tensor& x) override {
    PattentionBlockLayers& l = layers_;
    const torch::Tensor h = l.attn_norm(x);  // (B, T, d)
    const torch::Tensor y = x + l.o(multi_head_attention(l.q(h), l.k(h), l.v(h), heads_));
    return y + l.ffn(l.ffn_norm(y));  // (B, T, d)
  }

 private:
  std::int64_t heads_;
  PattentionBlockLayers layers_;
};

// The skeleton. The family registers its patch embedding and head (a Linear or a Pattention)
// as "patch_embed" and "head", and adds the blocks.
class ImageTransformer : public ImageClassifier {
 public:
  explicit ImageTransformer(const ImageSpec& spec) : spec_grid_(spec.patch_grid()), cls_(spec.cls_token) {
    torch::NoGradGuard no_grad;
    if (cls_) cls_token_ = register_parameter("cls_token", torch::randn({spec.d}) * spec.init_std);
    position_ = register_parameter("position", torch::randn({spec.tokens(), spec.d}) * spec.init_std);
    layers_ = register_module("layers", torch::nn::ModuleList());
    final_norm_ = register_module("final_norm",
                                  torch::nn::LayerNorm(torch::nn::LayerNormOptions({spec.d}).eps(spec.layernorm_eps)));
  }

  void set_patch_embed(Projection embed) { patch_embed_ = std::move(embed); }
  void set_head(Projection head) { head_ = std::move(head); }
  void add_block(std::shared_ptr<Block> block) {
    layers_->push_back(block);
    blocks_.push_back(std::move(block));
  }

  torch::Tensor forward(const torch::Tensor& images) override {
    torch::Tensor x = patch_embed_(patchify(images, spec_grid_.patch));              // (B, rows·cols, d)
    if (cls_) x = torch::cat({cls_token_.expand({x.size(0), 1, x.size(2)}), x}, 1);  // (B, T, d)
    x = x + position_;
    for (const auto& block : blocks_) x = block->forward(x);
    x = final_norm_(x);
    const torch::Tensor pooled = cls_ ? x.select(1, 0) : x.mean(1);  // (B, d)
    return head_(pooled);                                            // (B, K)
  }

  PatchGrid patch_grid() const override { return spec_grid_; }

 private:
  PatchGrid spec_grid_;
  bool cls_;
  torch::Tensor cls_token_, position_;
  torch::nn::ModuleList layers_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  torch::nn::LayerNorm final_norm_{nullptr};
  Projection patch_embed_, head_;
};

torch::nn::Linear linear(ImageTransformer& model, const char* name, std::int64_t in, std::int64_t out, double std) {
  auto layer = model.register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out)));
  torch::NoGradGuard no_grad;
  layer->weight.normal_(0.0, std);
  layer->bias.zero_();
  return layer;
}

}  // namespace

std::shared_ptr<Model> vit_build(const VitSpec& spec) {
  auto model = std::make_shared<ImageTransformer>(spec);
  torch::nn::Linear embed = linear(*model, "patch_embed", spec.patch_pixels(), spec.d, spec.init_std);
  model->set_patch_embed([embed](const torch::Tensor& x) mutable { return embed->forward(x); });
  for (std::int64_t i = 0; i < spec.layers; ++i) model->add_block(std::make_shared<VitBlock>(spec));
  torch::nn::Linear head = linear(*model, "head", spec.d, spec.classes, spec.init_std);
  model->set_head([head](const torch::Tensor& x) mutable { return head->forward(x); });
  return model;
}

std::shared_ptr<Model> vision_tokenformer_build(const VisionTokenformerSpec& spec) {
  auto model = std::make_shared<ImageTransformer>(spec);
  if (spec.patch_embed == "pattention") {
    Pattention embed = model->register_module(
        "patch_embed", Pattention(pattention_options(spec, spec.patch_pixels(), spec.d, spec.n_patch, "patch_embed")));
    model->set_patch_embed([embed](const torch::Tensor& x) mutable { return embed->forward(x); });
  } else {
    torch::nn::Linear embed = linear(*model, "patch_embed", spec.patch_pixels(), spec.d, spec.init_std);
    model->set_patch_embed([embed](const torch::Tensor& x) mutable { return embed->forward(x); });
  }
  for (std::int64_t i = 0; i < spec.layers; ++i) model->add_block(std::make_shared<TokenformerBlock>(spec, i));
  if (spec.head == "pattention") {
    Pattention head =
        model->register_module("head", Pattention(pattention_options(spec, spec.d, spec.classes, spec.n_head, "head")));
    model->set_head([head](const torch::Tensor& x) mutable { return head->forward(x); });
  } else {
    torch::nn::Linear head = linear(*model, "head", spec.d, spec.classes, spec.init_std);
    model->set_head([head](const torch::Tensor& x) mutable { return head->forward(x); });
  }
  return model;
}

}  // namespace tfw::vision
