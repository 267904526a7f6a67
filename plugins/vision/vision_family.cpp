// The `vit` and `vision_tokenformer` model-family plugins: config parsing and validation,
// parameter counts and FLOPs (docs/design/VISION.md), registration.
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/plugin/task.h"
#include "plugins/vision/vision.h"

namespace tfw::vision {

ModelShape ImageSpec::shape() const {
  ModelShape s{layers, d, heads, classes, tokens()};
  s.image_size = image_size;
  s.channels = channels;
  return s;
}

toml::table ImageSpec::image_toml() const {
  return toml::table{{"image_size", image_size},
                     {"channels", channels},
                     {"patch", patch},
                     {"classes", classes},
                     {"layers", layers},
                     {"d", d},
                     {"heads", heads},
                     {"pool", cls_token ? "cls" : "mean"},
                     {"layernorm", toml::table{{"eps", layernorm_eps}}}};
}

std::string ImageSpec::image_summary() const {
  return fmt::format("{}x{}/{} {} K={}", image_size, image_size, patch, cls_token ? "cls" : "mean", classes);
}

// ViT: weights and biases of the patch embedding, the class token, T position embeddings,
// per layer two affine norms, Q, K, V, O (d × d with bias) and the MLP (d × d_ffn, d_ffn × d
// with biases); the final norm; the head (d × K with bias).
std::int64_t VitSpec::parameter_count() const {
  const std::int64_t per_layer = 2 * 2 * d + 4 * (d * d + d) + (d * d_ffn + d_ffn) + (d_ffn * d + d);
  return embedding_parameter_count() + layers * per_layer + 2 * d;
}

std::int64_t VitSpec::embedding_parameter_count() const {
  return (patch_pixels() * d + d) + (cls_token ? d : 0) + tokens() * d + (d * classes + classes);
}

// Per token: the blocks' weight matrices (N = L·(4d² + 2·d·d_ffn), 2N FLOPs) and attention
// (4·L·d·T); per image: the patch embedding of every patch and the head.
FlopsPerToken VitSpec::flops_per_token(std::int64_t T) const {
  const std::int64_t N = layers * (4 * d * d + 2 * d * d_ffn);
  FlopsPerToken f{T, 2 * N, 4 * layers * d * T, 0};
  f.per_example = 2 * patch_pixels() * d * patches() + 2 * d * classes;
  return f;
}

toml::table VitSpec::to_toml() const {
  toml::table t = image_toml();
  t.insert("d_ffn", d_ffn);
  t.insert("init", toml::table{{"std", init_std}});
  return t;
}

std::string VitSpec::summary() const {
  return fmt::format("L={} d={} H={} d_ffn={} {}", layers, d, heads, d_ffn, image_summary());
}

// The vision Tokenformer: as ViT, with each block's Q, K, V, O and FFN a Pattention (keys and
// values, n × d each) and parameter-free block norms; the patch embedding and head linear or
// Pattentions.
std::int64_t VisionTokenformerSpec::parameter_count() const {
  std::int64_t per_layer = 2 * d * (4 * n_attn + n_ffn);
  if (layernorm_affine) per_layer += 2 * 2 * d;
  return embedding_parameter_count() + layers * per_layer + 2 * d;
}

std::int64_t VisionTokenformerSpec::embedding_parameter_count() const {
  const std::int64_t embed = patch_embed == "pattention" ? n_patch * (patch_pixels() + d) : patch_pixels() * d + d;
  const std::int64_t out = head == "pattention" ? n_head * (d + classes) : d * classes + classes;
  return embed + (cls_token ? d : 0) + tokens() * d + out;
}

FlopsPerToken VisionTokenformerSpec::flops_per_token(std::int64_t T) const {
  const std::int64_t N = 2 * layers * d * (4 * n_attn + n_ffn);
  FlopsPerToken f{T, 2 * N, 4 * layers * d * T, 0};
  const std::int64_t embed = patch_embed == "pattention" ? 2 * n_patch * (patch_pixels() + d) : 2 * patch_pixels() * d;
  const std::int64_t out = head == "pattention" ? 2 * n_head * (d + classes) : 2 * d * classes;
  f.per_example = embed * patches() + out;
  return f;
}

double VisionTokenformerSpec::value_init_std() const {
  return value_std > 0 ? value_std : 2.0 / (static_cast<double>(layers) * std::sqrt(static_cast<double>(d)));
}

toml::table VisionTokenformerSpec::to_toml() const {
  toml::table t = image_toml();
  t.insert("n_attn", n_attn);
  t.insert("n_ffn", n_ffn);
  t.insert("patch_embed", patch_embed);
  t.insert("head", head);
  if (patch_embed == "pattention") t.insert("n_patch", n_patch);
  if (head == "pattention") t.insert("n_head", n_head);
  t.insert_or_assign("layernorm", toml::table{{"affine", layernorm_affine}, {"eps", layernorm_eps}});
  t.insert("pattention", pattention_settings_toml({norm, tau, pattention_eps}));
  t.insert("init", toml::table{{"std", init_std}, {"key_std", key_std}, {"value_std", value_init_std()}});
  return t;
}

std::string VisionTokenformerSpec::summary() const {
  return fmt::format("L={} d={} H={} n_attn={} n_ffn={} {} norm={}{}{}", layers, d, heads, n_attn, n_ffn,
                     image_summary(), pattention_norm_name(norm),
                     patch_embed == "pattention" ? fmt::format(" n_patch={}", n_patch) : "",
                     head == "pattention" ? fmt::format(" n_head={}", n_head) : "");
}

namespace {

// The keys both families read; `table` is the [model] table.
void image_parse(ConfigTable& table, ImageSpec& spec) {
  spec.image_size = config_size(table, "image_size", table.get_int("image_size", 28));
  spec.channels = config_size(table, "channels", table.get_int("channels", 1));
  spec.patch = config_size(table, "patch", table.get_int("patch", 7));
  spec.classes = config_size(table, "classes", table.get_int("classes", 10));
  spec.layers = config_size(table, "layers", table.require_int("layers"), kMaxLayers);
  spec.d = config_size(table, "d", table.require_int("d"));
  spec.heads = config_size(table, "heads", table.require_int("heads"));
  spec.cls_token = table.get_choice("pool", "cls", {"cls", "mean"}) == "cls";
  if (spec.image_size % spec.patch != 0) {
    table.fail("patch", fmt::format("image_size = {} is not divisible by patch = {}", spec.image_size, spec.patch),
               "choose a patch size that divides the image: 4, 7, 14 or 28 for 28×28 images");
  }
  if (spec.d % spec.heads != 0) {
    table.fail("heads", fmt::format("d = {} is not divisible by heads = {}", spec.d, spec.heads),
               "choose heads that divide d (head width dh = d / heads)");
  }
}

class VitFamily : public FamilyOf<VitSpec> {
 public:
  VitFamily()
      : FamilyOf({"vit",
                  "Vision Transformer: patch embedding, class token, learned positions, pre-LN blocks, linear head",
                  {},
                  kImageClassificationTask},
                 vit_build) {}

  std::shared_ptr<const ModelSpec> parse(ConfigTable& table) const override {
    auto spec = std::make_shared<VitSpec>();
    image_parse(table, *spec);
    spec->d_ffn = config_size(table, "d_ffn", table.get_int("d_ffn", 4 * spec->d));
    ConfigTable layernorm = table.sub("layernorm");
    spec->layernorm_eps = layernorm.get_positive("eps", 1e-5);
    layernorm.finish();
    ConfigTable init = table.sub("init");
    spec->init_std = init.get_nonnegative("std", 0.02);
    init.finish();
    return spec;
  }
};

class VisionTokenformerFamily : public FamilyOf<VisionTokenformerSpec> {
 public:
  VisionTokenformerFamily()
      : FamilyOf({"vision_tokenformer",
                  "Tokenformer-ViT: the ViT skeleton with Pattention projections and parameter-free block norms",
                  {"pattention_grow"},
                  kImageClassificationTask},
                 vision_tokenformer_build) {}

  std::shared_ptr<const ModelSpec> parse(ConfigTable& table) const override {
    auto spec = std::make_shared<VisionTokenformerSpec>();
    image_parse(table, *spec);
    spec->n_attn = config_size(table, "n_attn", table.require_int("n_attn"));
    spec->n_ffn = config_size(table, "n_ffn", table.require_int("n_ffn"));
    spec->patch_embed = table.get_choice("patch_embed", "linear", {"linear", "pattention"});
    spec->head = table.get_choice("head", "linear", {"linear", "pattention"});
    if (spec->patch_embed == "pattention") {
      spec->n_patch = config_size(table, "n_patch", table.get_int("n_patch", spec->patch_pixels()));
    } else if (table.raw_self().contains("n_patch")) {
      table.fail("n_patch", "is only read with patch_embed = \"pattention\"",
                 "remove it, or set patch_embed = \"pattention\"");
    }
    if (spec->head == "pattention") {
      spec->n_head = config_size(table, "n_head", table.get_int("n_head", spec->d));
    } else if (table.raw_self().contains("n_head")) {
      table.fail("n_head", "is only read with head = \"pattention\"", "remove it, or set head = \"pattention\"");
    }
    pattention_blocks_parse(table, *spec);
    ConfigTable init = table.sub("init");
    spec->init_std = init.get_nonnegative("std", 0.02);
    spec->key_std = init.get_nonnegative("key_std", 0.02);
    spec->value_std = init.get_nonnegative("value_std", 0.0);
    init.finish();
    return spec;
  }
};

}  // namespace
}  // namespace tfw::vision

TFW_PLUGIN(registrar) {
  registrar.add_model_family(std::make_shared<tfw::vision::VitFamily>());
  registrar.add_model_family(std::make_shared<tfw::vision::VisionTokenformerFamily>());
}
