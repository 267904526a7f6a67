// Growth in depth, for both families (docs/growth.md, "Depth"):
// - `depth_grow` inserts new layers (interleaved, at the top or at the bottom) whose output
//   projections start at zero — the Tokenformer's o and ffn values, the Transformer's o and
//   ffn_down weights and biases — so that each new block adds nothing to the residual stream:
//   exact. Its other parameters are a copy of the neighbouring old layer (default) or fresh.
// - `stack` (G_stack, Du et al., NeurIPS 2024, "Stacking Your Transformers") repeats the
//   trained stack k times (L -> kL). Not function-preserving: declared inexact.
// Both copy every other parameter and buffer (embedding, final norm, tau and n0) by name.
#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/growth.h"

namespace tfw {
namespace {

const std::vector<std::string> kFamilies = {"tokenformer", "transformer"};

// The target must equal the source but for its layer count (and init scales).
void require_depth_only(const std::string& method, const ModelSpec& from, const ModelSpec& to) {
  if (from.family() != to.family() || std::find(kFamilies.begin(), kFamilies.end(), from.family()) == kFamilies.end()) {
    throw UsageError(fmt::format("{} grows tokenformer or transformer models within their family, not {} -> {}", method,
                                 from.family(), to.family()));
  }
  toml::table a = from.to_toml(), b = to.to_toml();
  for (toml::table* t : {&a, &b}) {
    t->erase("layers");
    t->erase("init");
  }
  if (a != b) {
    throw UsageError(
        with_hint(fmt::format("{} changes only the number of layers; the target config changes more", method),
                  "keep every [model] key but layers (and init) as the checkpoint's"));
  }
}

// "layers.7.q.keys" -> (7, "q.keys"); (-1, name) for a parameter outside the layers.
std::pair<std::int64_t, std::string> layer_of(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return {-1, name};
  const std::size_t dot = name.find('.', 7);
  return {std::stoll(name.substr(7, dot - 7)), name.substr(dot + 1)};
}

// Copies every parameter and buffer of `from` into `to`: a layer's from layer source[i] of the
// new layer i (-1: left as built), the rest by name.
void copy_by_layer(torch::nn::Module& from, torch::nn::Module& to, const std::vector<std::int64_t>& source) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> old;
  for (const auto& item : from.named_parameters()) old[item.key()] = item.value();
  for (const auto& item : from.named_buffers()) old[item.key()] = item.value();
  auto copy = [&](const std::string& name, torch::Tensor& target) {
    const auto [layer, rest] = layer_of(name);
    std::string key = name;
    if (layer >= 0) {
      if (source.at(static_cast<std::size_t>(layer)) < 0) return;
      key = fmt::format("layers.{}.{}", source[static_cast<std::size_t>(layer)], rest);
    }
    const auto found = old.find(key);
    if (found == old.end() || found->second.sizes() != target.sizes()) {
      throw Error(fmt::format("depth growth: no parameter {} of the shape of {} in the source model", key, name));
    }
    target.copy_(found->second);
  };
  for (auto& item : to.named_parameters()) copy(item.key(), item.value());
  for (auto& item : to.named_buffers()) copy(item.key(), item.value());
}

// The grown model on the source's device, and in its dtype when that is not the build's
// (a float64 test model): converting a float32 model would also turn the float64 tau
// buffers into float32 ones, which the checkpoint does not read back the same.
void follow(Model& grown, Model& source) {
  const torch::Tensor p = source.parameters().front();
  grown.to(p.device());
  if (grown.parameters().front().scalar_type() != p.scalar_type()) grown.to(p.scalar_type());
}

// What both depth methods share: both families, a new model (not in place).
class DepthMethod : public NamedGrowthMethod {
 public:
  explicit DepthMethod(std::string name) : NamedGrowthMethod({std::move(name), kFamilies, /*in_place=*/false}) {}
};

class DepthGrow : public DepthMethod {
 public:
  DepthGrow() : DepthMethod("depth_grow") {}
  bool declared_exact(const toml::table& options) const override {
    options_parse(options);
    return true;
  }

  GrowthPlan plan(const ModelSpec& from, const ModelSpec& to, const toml::table& table) const override {
    const Options o = options_parse(table);
    require_depth_only("depth_grow", from, to);
    const std::int64_t L = spec_int(from, "layers"), L2 = spec_int(to, "layers");
    if (L2 <= L) throw UsageError(fmt::format("depth_grow adds layers: layers {} -> {}", L, L2));
    GrowthPlan plan;
    std::vector<std::string> positions;
    const std::vector<std::int64_t> source = layer_sources(L, L2, o.at);
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] < 0) positions.push_back(std::to_string(i));
    }
    plan.changes.push_back(fmt::format("insert {} layers ({}), at positions {} of the {} ({} -> {} parameters)", L2 - L,
                                       o.at, fmt::join(positions, ", "), L2, from.parameter_count(),
                                       to.parameter_count()));
    plan.changes.push_back(fmt::format(
        "new layers: {}, output projections ({}) zero, so each adds nothing: exact",
        o.init == "copy" ? "a copy of the old layer below them (above, at the bottom)" : "freshly initialised",
        from.family() == "tokenformer" ? "o and ffn values" : "o and ffn_down"));
    plan.exact = true;
    return plan;
  }

  std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from, const ModelSpec& to,
                               const toml::table& table, std::uint64_t seed) const override {
    const Options o = options_parse(table);
    const std::int64_t L = spec_int(from, "layers"), L2 = spec_int(to, "layers");
    std::shared_ptr<Model> grown = family.build(to, seed);
    follow(*grown, model);
    std::vector<std::int64_t> source = layer_sources(L, L2, o.at);
    copy_by_layer(model, *grown, source);
    // The new layers: a copy of the nearest old layer below (at the bottom: the first old
    // layer), or as built; then zero output projections.
    if (o.init == "copy") {
      std::vector<std::int64_t> fill(source.size(), -1);
      std::int64_t below = -1;
      for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] >= 0)
          below = source[i];
        else
          fill[i] = below >= 0 ? below : 0;
      }
      copy_by_layer(model, *grown, fill);
    }
    torch::NoGradGuard no_grad;
    for (auto& item : grown->named_parameters()) {
      const auto [layer, rest] = layer_of(item.key());
      if (layer < 0 || source[static_cast<std::size_t>(layer)] >= 0) continue;
      if (rest == "o.values" || rest == "ffn.values" || rest == "o.weight" || rest == "o.bias" ||
          rest == "ffn_down.weight" || rest == "ffn_down.bias") {
        item.value().zero_();
      }
    }
    return grown;
  }

 private:
  struct Options {
    std::string at = "interleave", init = "copy";
  };
  static Options options_parse(const toml::table& table) {
    ConfigTable view(table, "options");
    Options o;
    o.at = view.get_choice("at", "interleave", {"interleave", "top", "bottom"});
    o.init = view.get_choice("init", "copy", {"copy", "fresh"});
    view.finish();
    return o;
  }
  // For each layer of the grown model, the old layer it continues (-1: a new layer).
  // interleave spreads the m new layers evenly: new layer k follows old layer
  // floor((k + 1)·L / m) - 1.
  static std::vector<std::int64_t> layer_sources(std::int64_t L, std::int64_t L2, const std::string& at) {
    const std::int64_t m = L2 - L;
    std::vector<std::int64_t> source;
    if (at == "bottom") source.assign(static_cast<std::size_t>(m), -1);
    std::vector<std::int64_t> after(static_cast<std::size_t>(L), 0);  // new layers after each old one
    if (at == "interleave") {
      for (std::int64_t k = 0; k < m; ++k)
        after[static_cast<std::size_t>(std::max<std::int64_t>(0, (k + 1) * L / m - 1))] += 1;
    }
    for (std::int64_t i = 0; i < L; ++i) {
      source.push_back(i);
      for (std::int64_t k = 0; k < after[static_cast<std::size_t>(i)]; ++k) source.push_back(-1);
    }
    if (at == "top") source.insert(source.end(), static_cast<std::size_t>(m), -1);
    return source;
  }
};

class Stack : public DepthMethod {
 public:
  Stack() : DepthMethod("stack") {}
  bool declared_exact(const toml::table& options) const override {
    ConfigTable(options, "options").finish();
    return false;
  }

  GrowthPlan plan(const ModelSpec& from, const ModelSpec& to, const toml::table& table) const override {
    ConfigTable(table, "options").finish();
    require_depth_only("stack", from, to);
    const std::int64_t L = spec_int(from, "layers"), L2 = spec_int(to, "layers");
    if (L2 <= L || L2 % L != 0) {
      throw UsageError(with_hint(fmt::format("stack repeats the whole stack: layers {} -> {} is not a multiple", L, L2),
                                 fmt::format("use layers = {} or {}, or depth_grow for any count", 2 * L, 3 * L)));
    }
    GrowthPlan plan;
    plan.changes.push_back(fmt::format("repeat the {} layers {} times ({} -> {} layers, {} -> {} parameters)", L,
                                       L2 / L, L, L2, from.parameter_count(), to.parameter_count()));
    plan.changes.push_back("not exact: every copy adds its block's output again (G_stack; measure it with --check)");
    plan.exact = false;
    return plan;
  }

  std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from, const ModelSpec& to,
                               const toml::table& table, std::uint64_t seed) const override {
    (void)table;
    const std::int64_t L = spec_int(from, "layers"), L2 = spec_int(to, "layers");
    std::shared_ptr<Model> grown = family.build(to, seed);
    follow(*grown, model);
    std::vector<std::int64_t> source;
    for (std::int64_t i = 0; i < L2; ++i) source.push_back(i % L);
    copy_by_layer(model, *grown, source);
    return grown;
  }
};

}  // namespace
}  // namespace tfw

TFW_PLUGIN(registrar) {
  registrar.add_growth_method(std::make_shared<tfw::DepthGrow>());
  registrar.add_growth_method(std::make_shared<tfw::Stack>());
}
