// The `pattention_grow` growth plugin (docs/design/GROWTH.md §1): appends m_attn parameter tokens to every
// attention Pattention (Q, K, V, O) and m_ffn to every FFN Pattention of a Tokenformer,
// in place, keeping L, d and H. Exact when new keys are zero and tau stays fixed (l2_gelu,
// gelu_l2, gelu_l1): a zero key scores 0, gelu(0) = 0, so it adds nothing to the
// normaliser nor to the output. Not exact: softmax, normal key init, tau = sqrt_n.
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/growth.h"
#include "engine/nn/pattention.h"

namespace tfw {
namespace {

// An integer key of the resolved [model] table, 0 when absent.
std::int64_t spec_int_or(const ModelSpec& spec, const char* key) {
  return spec.to_toml()[key].value_or(std::int64_t{0});
}

struct Options {
  std::string key_init, value_init, tau, optimizer, lr_schedule;
};

Options options_parse(const toml::table& table) {
  ConfigTable view(table, "options");
  Options o;
  o.key_init = view.get_choice("key_init", "zero", {"zero", "normal"});
  o.value_init = view.get_choice("value_init", "normal", {"normal", "zero"});
  o.tau = view.get_choice("tau", "fixed", {"fixed", "sqrt_n"});
  o.optimizer = view.get_choice("optimizer", "extend", {"extend", "reset"});
  o.lr_schedule = view.get_choice("lr_schedule", "continue", {"continue", "restart"});
  view.finish();
  if (o.key_init == "zero" && o.value_init == "zero") {
    throw UsageError(
        with_hint("options: key_init = \"zero\" with value_init = \"zero\" makes dead tokens (no gradient "
                  "reaches them)",
                  "use value_init = \"normal\" (the default) or key_init = \"normal\""));
  }
  return o;
}

class PattentionGrow : public NamedGrowthMethod {
 public:
  PattentionGrow() : NamedGrowthMethod({"pattention_grow", {"tokenformer", "vision_tokenformer"}, /*in_place=*/true}) {}

  bool declared_exact(const toml::table& table) const override {
    Options o = options_parse(table);
    return o.key_init == "zero" && o.tau == "fixed";  // and the norm is not softmax: see plan()
  }

  GrowthPlan plan(const ModelSpec& from, const ModelSpec& to, const toml::table& table) const override {
    Options o = options_parse(table);
    if (!grows(from.family()) || to.family() != from.family()) {
      throw UsageError(fmt::format("pattention_grow grows tokenformer and vision_tokenformer models, not {} -> {}",
                                   from.family(), to.family()));
    }
    std::vector<const char*> kept = {"layers", "d", "heads"};
    if (from.family() == "tokenformer") {
      kept.push_back("vocab");
    } else {  // the image skeleton; the patch embedding and the head keep their tokens
      kept.insert(kept.end(), {"image_size", "channels", "patch", "classes"});
      for (const char* key : {"pool", "patch_embed", "head"}) {
        if (spec_string(from, key, "") != spec_string(to, key, "")) {
          throw UsageError(with_hint(fmt::format("pattention_grow keeps {}: {} -> {} is not a token growth", key,
                                                 spec_string(from, key, ""), spec_string(to, key, "")),
                                     "change only n_attn and n_ffn in the target config"));
        }
      }
      for (const char* key : {"n_patch", "n_head"}) {
        if (spec_int_or(from, key) != spec_int_or(to, key)) {
          throw UsageError(with_hint(fmt::format("pattention_grow grows the blocks only: {} {} -> {}", key,
                                                 spec_int_or(from, key), spec_int_or(to, key)),
                                     "change only n_attn and n_ffn in the target config"));
        }
      }
    }
    for (const char* key : kept) {
      if (spec_int(from, key) != spec_int(to, key)) {
        throw UsageError(with_hint(fmt::format("pattention_grow keeps {}: {} -> {} is not a token growth", key,
                                               spec_int(from, key), spec_int(to, key)),
                                   "change only n_attn and n_ffn in the target config"));
      }
    }
    const std::string norm = spec_string(from, "pattention.norm", "l2_gelu");
    if (spec_string(to, "pattention.norm", "l2_gelu") != norm) {
      throw UsageError("pattention_grow keeps pattention.norm; the target config changes it");
    }
    const std::int64_t m_attn = spec_int(to, "n_attn") - spec_int(from, "n_attn");
    const std::int64_t m_ffn = spec_int(to, "n_ffn") - spec_int(from, "n_ffn");
    if (m_attn < 0 || m_ffn < 0) {
      throw UsageError(fmt::format("pattention_grow only adds tokens: n_attn {} -> {}, n_ffn {} -> {}",
                                   spec_int(from, "n_attn"), spec_int(to, "n_attn"), spec_int(from, "n_ffn"),
                                   spec_int(to, "n_ffn")));
    }
    GrowthPlan plan;
    const std::int64_t L = spec_int(from, "layers");
    plan.changes.push_back(
        fmt::format("add {} tokens to each of Q, K, V, O and {} to the FFN in all {} layers "
                    "({} -> {} parameters)",
                    m_attn, m_ffn, L, from.parameter_count(), to.parameter_count()));
    plan.changes.push_back(fmt::format(
        "new keys {}, new values {}; tau {}; optimizer {}; lr schedule {}",
        o.key_init == "zero" ? "zero" : "N(0, key_std)", o.value_init == "zero" ? "zero" : "N(0, value_std)",
        o.tau == "fixed" ? "kept (creation-time n0)" : "reset to sqrt(n + m)", o.optimizer, o.lr_schedule));
    // The target's pattention.tau decides: a model whose scale follows n (an imported official
    // one) grown into tau = fixed keeps its current scale, and so its function.
    plan.exact = o.key_init == "zero" && o.tau == "fixed" && norm != "softmax" &&
                 spec_string(to, "pattention.tau", "fixed") == "fixed";
    if (!plan.exact) {
      plan.changes.push_back(norm == "softmax"      ? "not exact: softmax gives zero keys weight exp(0) > 0"
                             : o.key_init != "zero" ? "not exact: new keys are random"
                                                    : "not exact: tau changes with n");
    }
    return plan;
  }

  std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from, const ModelSpec& to,
                               const toml::table& table, std::uint64_t seed) const override {
    Options o = options_parse(table);
    const std::int64_t m_attn = spec_int(to, "n_attn") - spec_int(from, "n_attn");
    const std::int64_t m_ffn = spec_int(to, "n_ffn") - spec_int(from, "n_ffn");
    const double key_std = spec_double(to, "init.key_std", 0.02);
    const double value_std = spec_double(to, "init.value_std", 0.02);
    const TauMode target_mode = tau_mode_parse(spec_string(to, "pattention.tau", "fixed"));
    torch::Generator generator = at::detail::createCPUGenerator(seed);
    torch::NoGradGuard no_grad;
    for (const auto& item : model.named_modules()) {
      auto* layer = dynamic_cast<PattentionImpl*>(item.value().get());
      // The blocks' Pattentions: an image model's Pattention patch embedding and head keep theirs.
      if (layer == nullptr || item.key().rfind("layers.", 0) != 0) continue;
      const bool ffn = item.key().size() >= 4 && item.key().substr(item.key().size() - 4) == ".ffn";
      const std::int64_t m = ffn ? m_ffn : m_attn;
      if (target_mode == TauMode::fixed && layer->options().tau_mode() == TauMode::sqrt_n) {
        const std::int64_t n = layer->tokens();  // the scale it uses now becomes its fixed one
        layer->tau.fill_(std::sqrt(static_cast<double>(n)));
        layer->n0.fill_(n);
      }
      layer->set_tau_mode(target_mode);
      if (m == 0) continue;
      auto options = layer->keys.options();
      // Drawn in float64 and cast, so float32 and float64 models grow with the same values.
      auto normal = [&](std::int64_t cols, double std) {
        return (torch::randn({m, cols}, generator, torch::kFloat64) * std).to(options);
      };
      torch::Tensor keys =
          o.key_init == "zero" ? torch::zeros({m, layer->keys.size(1)}, options) : normal(layer->keys.size(1), key_std);
      torch::Tensor values = o.value_init == "zero" ? torch::zeros({m, layer->values.size(1)}, options)
                                                    : normal(layer->values.size(1), value_std);
      layer->append_tokens(keys, values);
      if (o.tau == "sqrt_n") {
        const std::int64_t n = layer->tokens();
        layer->tau.fill_(std::sqrt(static_cast<double>(n)));
        layer->n0.fill_(n);
      }
    }
    (void)family;
    return std::dynamic_pointer_cast<Model>(model.shared_from_this());
  }
};

}  // namespace
}  // namespace tfw

TFW_PLUGIN(registrar) { registrar.add_growth_method(std::make_shared<tfw::PattentionGrow>()); }
