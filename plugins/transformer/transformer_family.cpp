// The `transformer` model-family plugin: config parsing and validation, parameter count and
// FLOPs (docs/design/TOKENFORMER.md §5: N = 12·L·d² when d_attn = d and d_ffn = 4d), registration.
#include <algorithm>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "plugins/transformer/transformer.h"

namespace tfw::transformer {

std::int64_t TransformerSpec::parameter_count() const {
  std::int64_t per_layer = 4 * d * d_attn() + 2 * d * d_ffn + 2 * 2 * d;  // projections, FFN, 2 norms
  if (bias) per_layer += 3 * d_attn() + d + d_ffn + d;                    // Q,K,V; O; FFN up; down
  return vocab * d + layers * per_layer + 2 * d;
}

FlopsPerToken TransformerSpec::flops_per_token(std::int64_t T) const {
  const std::int64_t N = layers * (4 * d * d_attn() + 2 * d * d_ffn);
  return {T, 2 * N, 4 * layers * d_attn() * T, 2 * vocab * d};
}

double MsgRamp::value(std::int64_t step) const {
  if (!on) return 1.0;
  const double c = static_cast<double>(step - start_step) / static_cast<double>(ramp_steps);
  return std::clamp(c, 0.0, 1.0);
}

toml::table TransformerSpec::to_toml() const {
  toml::table table{
      {"layers", layers},
      {"d", d},
      {"heads", heads},
      {"head_dim", head_dim},
      {"d_ffn", d_ffn},
      {"vocab", vocab},
      {"seq_len", seq_len},
      {"rotary_pct", rotary_pct},
      {"rotary_base", rotary_base},
      {"layernorm", toml::table{{"eps", layernorm_eps}}},
      {"linear", toml::table{{"bias", bias}}},
      {"init", toml::table{{"std", init_std}}},
  };
  if (msg.on) {
    toml::array layers_new;
    for (std::int64_t i : msg.new_layers) layers_new.push_back(i);
    table.insert("msg", toml::table{{"start_step", msg.start_step},
                                    {"ramp_steps", msg.ramp_steps},
                                    {"d", msg.d},
                                    {"heads", msg.heads},
                                    {"d_ffn", msg.d_ffn},
                                    {"new_layers", layers_new}});
  }
  return table;
}

std::string TransformerSpec::summary() const {
  return fmt::format(
      "L={} d={} H={} dh={} d_ffn={} V={}{}{}", layers, d, heads, head_dim, d_ffn, vocab, bias ? " bias" : "",
      msg.on ? fmt::format(" msg(from d={} H={} d_ffn={} L={}, ramp {}+{})", msg.d, msg.heads, msg.d_ffn,
                           layers - static_cast<std::int64_t>(msg.new_layers.size()), msg.start_step, msg.ramp_steps)
             : "");
}

namespace {

class TransformerFamily : public FamilyOf<TransformerSpec> {
 public:
  TransformerFamily()
      : FamilyOf({"transformer",
                  "baseline Transformer LM: linear projections, GELU FFN, affine LayerNorms, tied logits",
                  {"net2net", "hypercloning", "depth_grow", "stack", "msg"}},
                 transformer_build) {}

  std::shared_ptr<const ModelSpec> parse(ConfigTable& table) const override {
    auto spec = std::make_shared<TransformerSpec>();
    decoder_sizes_parse(table, *spec);
    if (!table.has("head_dim") && spec->d % spec->heads != 0) {
      table.fail("heads", fmt::format("d = {} is not divisible by heads = {}", spec->d, spec->heads),
                 "choose heads that divide d, or set head_dim explicitly");
    }
    spec->head_dim = config_size(table, "head_dim", table.get_int("head_dim", spec->d / spec->heads));
    spec->d_ffn = config_size(table, "d_ffn", table.get_int("d_ffn", 4 * spec->d));
    decoder_context_parse(table, *spec);
    ConfigTable layernorm = table.sub("layernorm");
    spec->layernorm_eps = layernorm.get_positive("eps", 1e-5);
    layernorm.finish();
    ConfigTable linear = table.sub("linear");
    spec->bias = linear.get_bool("bias", false);
    linear.finish();
    ConfigTable init = table.sub("init");
    spec->init_std = init.get_nonnegative("std", 0.02);
    init.finish();
    if (table.has("msg")) {  // written by the msg growth method, read back from checkpoints
      ConfigTable msg = table.sub("msg");
      MsgRamp& m = spec->msg;
      m.on = true;
      m.start_step = msg.require_int("start_step");
      m.ramp_steps = msg.require_int("ramp_steps");
      m.d = msg.require_int("d");
      m.heads = msg.require_int("heads");
      m.d_ffn = msg.require_int("d_ffn");
      m.new_layers = msg.get_int_array("new_layers");
      if (m.start_step < 0 || m.ramp_steps < 1) msg.fail("ramp_steps", "needs start_step >= 0 and ramp_steps >= 1", "");
      if (m.d < 1 || m.d > spec->d || m.heads < 1 || m.heads > spec->heads || m.d_ffn < 1 || m.d_ffn > spec->d_ffn) {
        msg.fail("d",
                 fmt::format("the sizes before the growth (d {}, heads {}, d_ffn {}) must be within the model's", m.d,
                             m.heads, m.d_ffn),
                 "");
      }
      for (std::size_t k = 0; k < m.new_layers.size(); ++k) {
        if (m.new_layers[k] < 0 || m.new_layers[k] >= spec->layers ||
            (k > 0 && m.new_layers[k] <= m.new_layers[k - 1])) {
          msg.fail("new_layers", "must be increasing layer indices of the model", "");
        }
      }
      msg.finish();
    }
    return spec;
  }
};

}  // namespace
}  // namespace tfw::transformer

TFW_PLUGIN(registrar) {
  registrar.add_model_family(std::make_shared<tfw::transformer::TransformerFamily>());
  registrar.add_growth_method(tfw::transformer::msg_method());
}
