// `msg`: Masked Structural Growth (Yao et al., "Masked Structural Growth for 2x Faster Language
// Model Pre-training", ICLR 2024) for the Transformer, in width (hidden dims, heads, FFN
// neurons) and depth (docs/growth.md, "msg"). The grown model is built at the target size
// with fresh weights; the source's weights fill the leading block of each tensor, and every
// new structure is multiplied by a mask c that ramps from 0 to 1 over `ramp_steps` training
// steps from the growth (transformer.h, MsgRamp). At c = 0 the grown model computes exactly
// what the source computed, whatever the new weights are: exact at the moment of growing.
#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/growth.h"
#include "plugins/transformer/transformer.h"

namespace tfw::transformer {

namespace {

struct Options {
  std::int64_t ramp_steps = 100;
  std::string at = "top";  // where new layers go: top, bottom, interleave
};

Options options_parse(const toml::table& table) {
  ConfigTable view(table, "options");
  Options o;
  o.ramp_steps = view.get_int("ramp_steps", o.ramp_steps);
  if (o.ramp_steps < 1) view.fail("ramp_steps", fmt::format("must be at least 1, got {}", o.ramp_steps), "");
  o.at = view.get_choice("at", o.at, {"top", "bottom", "interleave"});
  view.finish();
  return o;
}

const TransformerSpec& transformer_of(const ModelSpec& spec) {
  const auto* t = dynamic_cast<const TransformerSpec*>(&spec);
  if (t == nullptr) {
    throw UsageError(with_hint(fmt::format("msg grows transformer models, not {}", spec.family()),
                               "a Tokenformer grows exactly in width with pattention_grow and in depth with "
                               "depth_grow; msg's masks are for the Transformer"));
  }
  return *t;
}

// The grown model's index of each old layer, for L0 -> L layers.
std::vector<std::int64_t> old_positions(std::int64_t L0, std::int64_t L, const std::string& at) {
  const std::int64_t k = L - L0;
  std::vector<std::int64_t> positions;
  for (std::int64_t j = 0; j < L0; ++j) {
    if (at == "top")
      positions.push_back(j);
    else if (at == "bottom")
      positions.push_back(j + k);
    else
      positions.push_back(j + (j * k + k - 1) / L0);  // interleave: new layers spread between old ones
  }
  return positions;
}

class Msg : public NamedGrowthMethod {
 public:
  Msg() : NamedGrowthMethod({"msg", {"transformer"}, /*in_place=*/false}) {}
  bool declared_exact(const toml::table& table) const override {
    options_parse(table);
    return true;
  }

  GrowthPlan plan(const ModelSpec& from_spec, const ModelSpec& to_spec, const toml::table& table) const override {
    const Options o = options_parse(table);
    const TransformerSpec& from = transformer_of(from_spec);
    const TransformerSpec& to = transformer_of(to_spec);
    auto keep = [&](const char* what, auto a, auto b) {
      if (a != b) {
        throw UsageError(with_hint(fmt::format("msg keeps {}: {} -> {}", what, a, b),
                                   "msg grows d, heads, d_ffn and layers; keep the other [model] keys"));
      }
    };
    keep("vocab", from.vocab, to.vocab);
    keep("head_dim (new heads have the old heads' width)", from.head_dim, to.head_dim);
    keep("linear.bias", from.bias, to.bias);
    keep("rotary_pct", from.rotary_pct, to.rotary_pct);
    keep("rotary_base", from.rotary_base, to.rotary_base);
    keep("layernorm.eps", from.layernorm_eps, to.layernorm_eps);
    for (auto [what, a, b] : {std::tuple<const char*, std::int64_t, std::int64_t>{"d", from.d, to.d},
                              {"heads", from.heads, to.heads},
                              {"d_ffn", from.d_ffn, to.d_ffn},
                              {"layers", from.layers, to.layers}}) {
      if (b < a) {
        throw UsageError(
            with_hint(fmt::format("msg only grows: {} {} -> {}", what, a, b),
                      "the target must be at least as large as the checkpoint in d, heads, d_ffn and layers"));
      }
    }
    if (to.d == from.d && to.heads == from.heads && to.d_ffn == from.d_ffn && to.layers == from.layers) {
      throw UsageError("msg: the target has the checkpoint's size; nothing grows");
    }
    GrowthPlan plan;
    plan.changes.push_back(fmt::format(
        "grow d {} -> {}, heads {} -> {} (dh {}), d_ffn {} -> {}, layers {} -> {} "
        "(new layers at the {})",
        from.d, to.d, from.heads, to.heads, to.head_dim, from.d_ffn, to.d_ffn, from.layers, to.layers, o.at));
    plan.changes.push_back(
        fmt::format("new weights fresh (init.std {}); new dims, heads, neurons and layers masked "
                    "by c, ramping 0 -> 1 over {} steps from the growth; LayerNorm statistics "
                    "weighted by the mask",
                    to.init_std, o.ramp_steps));
    plan.changes.push_back("optimizer reset (a new model); exact: c = 0 at the growth");
    plan.exact = true;
    return plan;
  }

  toml::table grown_model(const ModelSpec& from_spec, const ModelSpec& to_spec, const toml::table& table,
                          std::int64_t step) const override {
    const Options o = options_parse(table);
    const TransformerSpec& from = transformer_of(from_spec);
    TransformerSpec to = transformer_of(to_spec);
    if (from.msg.on && from.msg.value(step) < 1.0) {
      throw UsageError(
          with_hint(fmt::format("msg: the model is still in the mask ramp of an earlier msg growth "
                                "(c = {:.3f} at step {})",
                                from.msg.value(step), step),
                    fmt::format("grow again at step {} or later", from.msg.start_step + from.msg.ramp_steps)));
    }
    to.msg = MsgRamp{};
    to.msg.on = true;
    to.msg.start_step = step;
    to.msg.ramp_steps = o.ramp_steps;
    to.msg.d = from.d;
    to.msg.heads = from.heads;
    to.msg.d_ffn = from.d_ffn;
    const std::vector<std::int64_t> old = old_positions(from.layers, to.layers, o.at);
    for (std::int64_t i = 0; i < to.layers; ++i) {
      if (std::find(old.begin(), old.end(), i) == old.end()) to.msg.new_layers.push_back(i);
    }
    return to.to_toml();
  }

  std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from_spec,
                               const ModelSpec& to_spec, const toml::table& table, std::uint64_t seed) const override {
    const Options o = options_parse(table);
    const TransformerSpec& from = transformer_of(from_spec);
    const TransformerSpec& to = transformer_of(to_spec);
    if (!to.msg.on) throw Error("msg: apply() needs the grown model's spec from grown_model()");
    std::shared_ptr<Model> grown = family.build(to, seed);
    const torch::Tensor p = model.parameters().front();
    grown->to(p.device(), p.scalar_type());
    const std::vector<std::int64_t> positions = old_positions(from.layers, to.layers, o.at);
    std::map<std::string, torch::Tensor> old;
    for (const auto& item : model.named_parameters()) old[item.key()] = item.value();
    torch::NoGradGuard no_grad;
    for (auto& item : grown->named_parameters()) {
      std::string key = item.key();
      if (key.rfind("layers.", 0) == 0) {  // layers.<i>.rest: from the old layer placed at i, if any
        const std::size_t dot = key.find('.', 7);
        const std::int64_t i = std::stoll(key.substr(7, dot - 7));
        const auto at = std::find(positions.begin(), positions.end(), i);
        if (at == positions.end()) continue;  // a new layer: fresh, masked
        key = fmt::format("layers.{}.{}", at - positions.begin(), key.substr(dot + 1));
      }
      const auto found = old.find(key);
      if (found == old.end() || found->second.dim() != item.value().dim()) {
        throw Error(fmt::format("msg: no parameter {} to copy into {}", key, item.key()));
      }
      // The old structures lead every dimension: old hidden dims, heads and neurons first.
      torch::Tensor slice = item.value();
      for (std::int64_t k = 0; k < slice.dim(); ++k) slice = slice.narrow(k, 0, found->second.size(k));
      slice.copy_(found->second);
    }
    return grown;
  }
};

}  // namespace

std::shared_ptr<const GrowthMethod> msg_method() { return std::make_shared<Msg>(); }

}  // namespace tfw::transformer
