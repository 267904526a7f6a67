// The `tokenformer` model-family plugin: config parsing and validation, parameter count
// and FLOPs (docs/design/TOKENFORMER.md §4, §5), registration.
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "plugins/tokenformer/tokenformer.h"

namespace tfw::tokenformer {

std::int64_t TokenformerSpec::parameter_count() const {
  std::int64_t per_layer = 2 * d * (4 * n_attn + n_ffn);  // keys and values of Q, K, V, O, FFN
  if (layernorm_affine) per_layer += 2 * 2 * d;           // γ and β of the two block norms
  return vocab * d + layers * per_layer + 2 * d;          // + final norm γ, β
}

FlopsPerToken TokenformerSpec::flops_per_token(std::int64_t T) const {
  const std::int64_t N = 2 * layers * d * (4 * n_attn + n_ffn);
  return {T, 2 * N, 4 * layers * d * T, 2 * vocab * d};
}

double TokenformerSpec::value_init_std() const {
  return value_std > 0 ? value_std : 2.0 / (static_cast<double>(layers) * std::sqrt(static_cast<double>(d)));
}

toml::table TokenformerSpec::to_toml() const {
  return toml::table{
      {"layers", layers},
      {"d", d},
      {"heads", heads},
      {"n_attn", n_attn},
      {"n_ffn", n_ffn},
      {"vocab", vocab},
      {"seq_len", seq_len},
      {"rotary_pct", rotary_pct},
      {"rotary_base", rotary_base},
      {"layernorm", toml::table{{"affine", layernorm_affine}, {"eps", layernorm_eps}}},
      {"pattention", pattention_settings_toml({norm, tau, pattention_eps})},
      {"init", toml::table{{"key_std", key_std}, {"value_std", value_init_std()}, {"embedding_std", embedding_std}}},
  };
}

std::string TokenformerSpec::summary() const {
  return fmt::format("L={} d={} H={} n_attn={} n_ffn={} V={} norm={} tau={}{}", layers, d, heads, n_attn, n_ffn, vocab,
                     pattention_norm_name(norm), tau_mode_name(tau), layernorm_affine ? " layernorm.affine" : "");
}

namespace {

class TokenformerFamily : public FamilyOf<TokenformerSpec> {
 public:
  TokenformerFamily()
      : FamilyOf({"tokenformer",
                  "Tokenformer LM: Pattention projections, parameter-free block norms, tied logits",
                  {"pattention_grow", "depth_grow", "stack"}},
                 tokenformer_build) {}

  std::shared_ptr<const ModelSpec> parse(ConfigTable& table) const override {
    auto spec = std::make_shared<TokenformerSpec>();
    decoder_sizes_parse(table, *spec);
    spec->n_attn = config_size(table, "n_attn", table.require_int("n_attn"));
    spec->n_ffn = config_size(table, "n_ffn", table.require_int("n_ffn"));
    if (spec->d % spec->heads != 0) {
      table.fail("heads", fmt::format("d = {} is not divisible by heads = {}", spec->d, spec->heads),
                 "choose heads that divide d (head width dh = d / heads)");
    }
    decoder_context_parse(table, *spec);
    pattention_blocks_parse(table, *spec);
    ConfigTable init = table.sub("init");
    spec->key_std = init.get_nonnegative("key_std", 0.02);
    spec->value_std = init.get_nonnegative("value_std", 0.0);
    spec->embedding_std = init.get_nonnegative("embedding_std", 0.02);
    init.finish();
    return spec;
  }
};

}  // namespace
}  // namespace tfw::tokenformer

TFW_PLUGIN(registrar) { registrar.add_model_family(std::make_shared<tfw::tokenformer::TokenformerFamily>()); }
