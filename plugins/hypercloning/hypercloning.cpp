// The `hypercloning` growth plugin (docs/design/GROWTH.md §2; Samragh et al. 2024) for the Transformer:
// integer multipliers k for the width d and m for the FFN width. Every residual vector of
// the grown model is tile_k(h) of the small model's and every FFN activation tile_m(a);
// heads are replicated whole (H' = k·H, head_dim unchanged). Linear (out, in) with output
// multiplier r and input multiplier c becomes (1/c)·T(W; r, c); biases tile, norms tile.
// The tied embedding is tiled undivided and the final norm's γ, β divided by k, so that
// logits = (h/k)·[E..E]ᵀ = h·Eᵀ. Cancelling noise (snr_db) on pairs of column blocks keeps
// the function exact and breaks the symmetry.
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/growth.h"

namespace tfw {
namespace {

struct Options {
  bool noise = true;
  double snr_db = 10.0;
};

Options options_parse(const toml::table& table) {
  ConfigTable view(table, "options");
  Options o;
  o.noise = view.get_bool("noise", true);
  o.snr_db = view.get_double("snr_db", 10.0);
  const std::string tie = view.get_choice("tie", "keep", {"keep", "untie"});
  view.finish();
  if (tie == "untie") {
    throw UsageError(
        with_hint("options.tie = \"untie\" needs a Transformer with an untied output head, which the "
                  "transformer family does not have yet",
                  "use tie = \"keep\" (the tie is kept exactly by dividing the final norm by k)"));
  }
  return o;
}

struct Multipliers {
  std::int64_t k, m;
};

Multipliers multipliers(const ModelSpec& from, const ModelSpec& to) {
  if (from.family() != "transformer" || to.family() != "transformer") {
    throw UsageError(fmt::format("hypercloning grows transformer models, not {} -> {}", from.family(), to.family()));
  }
  growth_require_same("hypercloning", from, to, {"layers", "vocab", "head_dim"});
  if (spec_bool(from, "linear.bias", false) != spec_bool(to, "linear.bias", false)) {
    throw UsageError("hypercloning keeps linear.bias; the target changes it");
  }
  auto ratio = [&](const char* key) {
    const std::int64_t a = spec_int(from, key), b = spec_int(to, key);
    if (b % a != 0 || b < a) {
      throw UsageError(with_hint(fmt::format("hypercloning needs integer multipliers: {} {} -> {} is x{:.3f}", key, a,
                                             b, static_cast<double>(b) / static_cast<double>(a)),
                                 "use an integer multiple, or net2net for arbitrary sizes"));
    }
    return b / a;
  };
  Multipliers mult{ratio("d"), ratio("d_ffn")};
  if (spec_int(to, "heads") != mult.k * spec_int(from, "heads")) {
    throw UsageError(fmt::format("hypercloning replicates heads with d: heads must become {} x {} = {}, not {}", mult.k,
                                 spec_int(from, "heads"), mult.k * spec_int(from, "heads"), spec_int(to, "heads")));
  }
  return mult;
}

// (1/c)·T(W; r, c) for a matrix, with cancelling noise on column-block pairs when asked.
torch::Tensor clone_matrix(const torch::Tensor& w, std::int64_t r, std::int64_t c, const Options& o,
                           torch::Generator& generator) {
  torch::Tensor grown = w.repeat({r, c}) / static_cast<double>(c);  // (r·out, c·in)
  if (!o.noise || c < 2) return grown;
  const std::int64_t out = w.size(0), in = w.size(1);
  for (std::int64_t i = 0; i < r; ++i) {
    for (std::int64_t j = 0; j + 1 < c; j += 2) {
      torch::Tensor a = grown.narrow(0, i * out, out).narrow(1, j * in, in);        // block (i, 2j')
      torch::Tensor b = grown.narrow(0, i * out, out).narrow(1, (j + 1) * in, in);  // block (i, 2j'+1)
      const double power = a.to(torch::kFloat64).square().mean().item<double>() / std::pow(10.0, o.snr_db / 10.0);
      torch::Tensor noise = (torch::randn(a.sizes(), generator, torch::kFloat64) * std::sqrt(power)).to(a.options());
      a.add_(noise);
      b.sub_(noise);
    }
  }
  return grown;
}

class HyperCloning : public NamedGrowthMethod {
 public:
  HyperCloning() : NamedGrowthMethod({"hypercloning", {"transformer"}, /*in_place=*/false}) {}
  bool declared_exact(const toml::table& table) const override {
    options_parse(table);
    return true;  // with or without noise: the noise cancels
  }

  GrowthPlan plan(const ModelSpec& from, const ModelSpec& to, const toml::table& table) const override {
    Options o = options_parse(table);
    Multipliers mult = multipliers(from, to);
    GrowthPlan plan;
    plan.exact = true;
    plan.changes.push_back(fmt::format("width d x{}, heads x{} (replicated whole), FFN width x{} ({} -> {} parameters)",
                                       mult.k, mult.k, mult.m, from.parameter_count(), to.parameter_count()));
    plan.changes.push_back(o.noise ? fmt::format("cancelling noise at {} dB SNR on Q, K, V, O, FFN up/down", o.snr_db)
                                   : "no noise: gradients stay block-tiled, training cannot leave the small function");
    plan.changes.push_back("tied embedding kept: embedding tiled, final norm divided by k; optimizer state reset");
    return plan;
  }

  std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from, const ModelSpec& to,
                               const toml::table& table, std::uint64_t seed) const override {
    Options o = options_parse(table);
    Multipliers mult = multipliers(from, to);
    const std::int64_t k = mult.k, m = mult.m;
    std::shared_ptr<Model> grown = family.build(to, seed);
    const torch::Tensor first = model.parameters().front();
    grown->to(first.device(), first.scalar_type());  // where the model lives (a GPU too) and its type
    std::map<std::string, torch::Tensor> source = parameters_by_name(model);
    torch::Generator generator = at::detail::createCPUGenerator(seed);
    torch::NoGradGuard no_grad;
    for (const auto& item : grown->named_parameters()) {
      const std::string& name = item.key();
      const torch::Tensor& w = source.at(name);
      auto ends_with = [&](const char* suffix) {
        const std::string s = suffix;
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
      };
      torch::Tensor value;
      if (name == "embedding") {
        value = w.repeat({1, k});  // (V, k·d), not divided
      } else if (name.rfind("final_norm.", 0) == 0) {
        value = w.repeat({k}) / static_cast<double>(k);  // keeps the tie exact
      } else if (ends_with("norm.weight") || ends_with("norm.bias")) {
        value = w.repeat({k});
      } else if (ends_with(".weight")) {
        const bool up = ends_with("ffn_up.weight"), down = ends_with("ffn_down.weight");
        value = clone_matrix(w, up ? m : k, down ? m : k, o, generator);
      } else {  // biases tile with their output multiplier, undivided
        value = w.repeat({ends_with("ffn_up.bias") ? m : k});
      }
      item.value().copy_(value);
    }
    return grown;
  }
};

}  // namespace
}  // namespace tfw

TFW_PLUGIN(registrar) { registrar.add_growth_method(std::make_shared<tfw::HyperCloning>()); }
