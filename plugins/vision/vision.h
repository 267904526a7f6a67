// The image-classification families (docs/design/VISION.md): `vit`, a Vision Transformer, and
// `vision_tokenformer`, the same skeleton with every projection in the blocks a Pattention.
// The skeleton: an image (C, H, W) is cut into P×P patches, row-major (H/P rows, W/P
// columns); each patch's C·P·P pixels (channel, row, column order) are embedded to d; a
// class token is prepended (pool = "cls") or not (pool = "mean"); learned position
// embeddings are added; pre-LN blocks with bidirectional multi-head attention; a final
// LayerNorm; the class token's state (or the mean over tokens) goes to the classification
// head. Shapes: B batch, T tokens, d width, K classes.
#pragma once

#include <memory>
#include <string>

#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/plugin/plugin_api.h"

namespace tfw::vision {

// What both families share.
struct ImageSpec : ModelSpec {
  std::int64_t image_size = 28, channels = 1, patch = 7, classes = 10;
  std::int64_t layers = 0, d = 0, heads = 0;
  bool cls_token = true;  // pool = "cls"; false: "mean"
  double layernorm_eps = 1e-5;
  double init_std = 0.02;  // patch and position embeddings, class token, linear weights

  std::int64_t grid() const { return image_size / patch; }
  std::int64_t patches() const { return grid() * grid(); }
  std::int64_t patch_pixels() const { return channels * patch * patch; }
  std::int64_t tokens() const { return patches() + (cls_token ? 1 : 0); }
  ModelShape shape() const override;
  PatchGrid patch_grid() const { return {grid(), grid(), patch, channels, cls_token ? 1 : 0}; }
  toml::table image_toml() const;     // the shared keys of [model]
  std::string image_summary() const;  // "28x28/7 cls K=10"
};

struct VitSpec : ImageSpec {
  std::int64_t d_ffn = 0;
  std::string family() const override { return "vit"; }
  std::int64_t parameter_count() const override;
  std::int64_t embedding_parameter_count() const override;
  FlopsPerToken flops_per_token(std::int64_t T) const override;
  toml::table to_toml() const override;
  std::string summary() const override;
};

struct VisionTokenformerSpec : ImageSpec {
  std::int64_t n_attn = 0, n_ffn = 0;
  bool layernorm_affine = false;  // the blocks' norms (the final norm is affine)
  PattentionNorm norm = PattentionNorm::l2_gelu;
  TauMode tau = TauMode::fixed;
  double pattention_eps = 1e-6;
  double key_std = 0.02, value_std = 0.0;  // value_std 0: 2/(L·sqrt(d))
  // The patch embedding and the head: "linear" (the paper's ViT skeleton keeps them) or
  // "pattention" with n_patch / n_head parameter tokens.
  std::string patch_embed = "linear", head = "linear";
  std::int64_t n_patch = 0, n_head = 0;

  std::string family() const override { return "vision_tokenformer"; }
  std::int64_t parameter_count() const override;
  std::int64_t embedding_parameter_count() const override;
  FlopsPerToken flops_per_token(std::int64_t T) const override;
  toml::table to_toml() const override;
  std::string summary() const override;
  double value_init_std() const;
};

std::shared_ptr<Model> vit_build(const VitSpec& spec);
std::shared_ptr<Model> vision_tokenformer_build(const VisionTokenformerSpec& spec);

}  // namespace tfw::vision
