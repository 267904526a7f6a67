// The `net2net` growth plugin (docs/design/GROWTH.md §3; Chen, Goodfellow, Shlens 2015) for the
// Transformer, to arbitrary sizes. A random map g: {0..q-1} -> {0..n-1} (g(j) = j for j < n,
// random above; or `map = "uniform"`, g(j) = j mod n) per grown dimension, cnt(u) the number
// of j with g(j) = u. Producers copy rows, consumers copy columns divided by cnt:
//   FFN width: up rows / down columns; heads: whole-head rows of Q, K, V / O columns;
//   hidden width d (one map for every layer): E, norms and writers (O, FFN down rows) copy,
//   readers (Q, K, V, FFN up columns) divide. The tied output head stays E[:, g] and the
//   final norm's γ, β are divided by cnt instead, so the logits keep the reader's division.
// Exact for FFN width and heads (with zero-sum noise too); hidden width is approximate
// (LayerNorm statistics become count-weighted) unless every cnt is equal.
#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/growth.h"

namespace tfw {
namespace {

struct Options {
  std::string map = "random";
  std::string noise = "none";  // none, zero_sum, gaussian
  double noise_scale = 0.01;   // noise std relative to the weights' std
};

Options options_parse(const toml::table& table) {
  ConfigTable view(table, "options");
  Options o;
  o.map = view.get_choice("map", "random", {"random", "uniform"});
  o.noise = view.get_choice("noise", "none", {"none", "zero_sum", "gaussian"});
  o.noise_scale = view.get_double("noise_scale", 0.01);
  view.finish();
  return o;
}

// g for growing n units to q: identity below n, then random (seeded) or round robin.
std::vector<std::int64_t> unit_map(std::int64_t n, std::int64_t q, const std::string& kind,
                                   torch::Generator& generator) {
  std::vector<std::int64_t> g(static_cast<std::size_t>(q));
  for (std::int64_t j = 0; j < q; ++j) {
    if (j < n)
      g[j] = j;
    else if (kind == "uniform")
      g[j] = j % n;
    else
      g[j] = torch::randint(n, {1}, generator, torch::kInt64).item<std::int64_t>();
  }
  return g;
}

std::vector<double> counts(const std::vector<std::int64_t>& g, std::int64_t n) {
  std::vector<double> cnt(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t u : g) cnt[u] += 1;
  return cnt;
}

// Index of rows/columns for a head-structured dimension: head j' covers [j'·dh, (j'+1)·dh).
torch::Tensor head_index(const std::vector<std::int64_t>& g_heads, std::int64_t dh) {
  std::vector<std::int64_t> index;
  for (std::int64_t head : g_heads) {
    for (std::int64_t t = 0; t < dh; ++t) index.push_back(head * dh + t);
  }
  return torch::tensor(index, torch::kInt64);
}

struct Dimension {
  torch::Tensor index;    // (q) source unit of each grown unit
  torch::Tensor divisor;  // (q) cnt of the source unit
  bool grows = false;
};

Dimension dimension(const std::vector<std::int64_t>& g, const std::vector<double>& cnt, std::int64_t unit,
                    const torch::TensorOptions& options) {
  Dimension dim;
  std::vector<double> divisor;
  for (std::int64_t source : g) {
    for (std::int64_t t = 0; t < unit; ++t) divisor.push_back(cnt[source]);
  }
  dim.index = (unit == 1 ? torch::tensor(g, torch::kInt64) : head_index(g, unit)).to(options.device());
  dim.divisor = torch::tensor(divisor, torch::kFloat64).to(options);
  dim.grows = g.size() != cnt.size();
  return dim;
}

// Consumer columns of replicated units: zero-sum noise per source unit keeps the sum exact;
// gaussian noise does not.
void consumer_noise(torch::Tensor& w, const std::vector<std::int64_t>& g, std::int64_t unit, const Options& o,
                    torch::Generator& generator) {
  if (o.noise == "none") return;
  const double std = o.noise_scale * w.to(torch::kFloat64).std().item<double>();
  const std::int64_t n = *std::max_element(g.begin(), g.end()) + 1;
  for (std::int64_t u = 0; u < n; ++u) {
    std::vector<std::int64_t> copies;
    for (std::size_t j = 0; j < g.size(); ++j) {
      if (g[j] == u) copies.push_back(static_cast<std::int64_t>(j));
    }
    if (copies.size() < 2) continue;
    const auto c = static_cast<std::int64_t>(copies.size());
    torch::Tensor noise = torch::randn({c, w.size(0), unit}, generator, torch::kFloat64) * std;
    if (o.noise == "zero_sum") noise = noise - noise.mean(0, true);
    for (std::int64_t i = 0; i < c; ++i) w.narrow(1, copies[i] * unit, unit).add_(noise[i].to(w.options()));
  }
}

class Net2Net : public NamedGrowthMethod {
 public:
  Net2Net() : NamedGrowthMethod({"net2net", {"transformer"}, /*in_place=*/false}) {}
  bool declared_exact(const toml::table& table) const override {
    return options_parse(table).noise != "gaussian";  // and the hidden width rule: see plan()
  }

  GrowthPlan plan(const ModelSpec& from, const ModelSpec& to, const toml::table& table) const override {
    Options o = options_parse(table);
    if (from.family() != "transformer" || to.family() != "transformer") {
      throw UsageError(fmt::format("net2net grows transformer models, not {} -> {}", from.family(), to.family()));
    }
    growth_require_same("net2net", from, to, {"layers", "vocab", "head_dim"});
    if (spec_bool(from, "linear.bias", false) != spec_bool(to, "linear.bias", false)) {
      throw UsageError("net2net keeps linear.bias; the target changes it");
    }
    GrowthPlan plan;
    const std::int64_t d = spec_int(from, "d"), d2 = spec_int(to, "d");
    for (const char* key : {"d", "heads", "d_ffn"}) {
      const std::int64_t a = spec_int(from, key), b = spec_int(to, key);
      if (b < a) throw UsageError(fmt::format("net2net only widens: {} {} -> {}", key, a, b));
      if (b > a) plan.changes.push_back(fmt::format("{} {} -> {}", key, a, b));
    }
    plan.changes.push_back(fmt::format("map {}, noise {}; optimizer state reset ({} -> {} parameters)", o.map, o.noise,
                                       from.parameter_count(), to.parameter_count()));
    const bool equal_counts = d2 == d || (o.map == "uniform" && d2 % d == 0);
    plan.exact = o.noise != "gaussian" && equal_counts;
    if (!equal_counts) {
      plan.changes.push_back(
          "not exact: widening d with unequal copy counts makes LayerNorm statistics "
          "count-weighted (use map = \"uniform\" with a multiple of d for an exact growth)");
    }
    if (o.noise == "gaussian") plan.changes.push_back("not exact: plain Gaussian noise on replicas");
    return plan;
  }

  std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from, const ModelSpec& to,
                               const toml::table& table, std::uint64_t seed) const override {
    Options o = options_parse(table);
    torch::Generator generator = at::detail::createCPUGenerator(seed);
    const std::int64_t dh = spec_int(from, "head_dim");
    auto map_of = [&](const char* key) { return unit_map(spec_int(from, key), spec_int(to, key), o.map, generator); };
    const std::vector<std::int64_t> g_d = map_of("d"), g_h = map_of("heads"), g_f = map_of("d_ffn");
    std::shared_ptr<Model> grown = family.build(to, seed);
    const auto options = model.parameters().front().options();
    grown->to(options.device(), options.dtype().toScalarType());  // where the model lives (a GPU too) and its type
    const Dimension hidden = dimension(g_d, counts(g_d, spec_int(from, "d")), 1, options);
    const Dimension heads = dimension(g_h, counts(g_h, spec_int(from, "heads")), dh, options);
    const Dimension ffn = dimension(g_f, counts(g_f, spec_int(from, "d_ffn")), 1, options);

    std::map<std::string, torch::Tensor> source = parameters_by_name(model);
    torch::NoGradGuard no_grad;
    for (const auto& item : grown->named_parameters()) {
      const std::string& name = item.key();
      const torch::Tensor& w = source.at(name);
      auto ends_with = [&](const std::string& suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      // (rows: producer dimension, columns: consumer dimension) of each weight.
      const Dimension* rows = nullptr;
      const Dimension* cols = nullptr;
      if (name == "embedding") {
        cols = &hidden;
      } else if (ends_with("norm.weight") || ends_with("norm.bias")) {
        rows = &hidden;
      } else if (ends_with(".q.weight") || ends_with(".k.weight") || ends_with(".v.weight")) {
        rows = &heads, cols = &hidden;
      } else if (ends_with(".q.bias") || ends_with(".k.bias") || ends_with(".v.bias")) {
        rows = &heads;
      } else if (ends_with(".o.weight")) {
        rows = &hidden, cols = &heads;
      } else if (ends_with("ffn_up.weight")) {
        rows = &ffn, cols = &hidden;
      } else if (ends_with("ffn_up.bias")) {
        rows = &ffn;
      } else if (ends_with("ffn_down.weight")) {
        rows = &hidden, cols = &ffn;
      } else {  // o.bias, ffn_down.bias
        rows = &hidden;
      }
      torch::Tensor value = w;
      if (rows != nullptr) value = value.index_select(0, rows->index);  // producers copy
      if (cols != nullptr) {
        value = value.index_select(1, cols->index);
        // Consumers divide by the copy count; the embedding only copies (it is an input).
        if (name != "embedding") value = value / cols->divisor;
      }
      // The tied output head reads the residual through E' = E[:, g], which cannot also be
      // divided: the division moves into the final norm, h'_j = h_g(j) / cnt(g(j)).
      if (name.rfind("final_norm.", 0) == 0) value = value / hidden.divisor;
      if (ends_with(".o.weight")) consumer_noise(value, g_h, dh, o, generator);
      if (ends_with("ffn_down.weight")) consumer_noise(value, g_f, 1, o, generator);
      item.value().copy_(value);
    }
    return grown;
  }
};

}  // namespace
}  // namespace tfw

TFW_PLUGIN(registrar) { registrar.add_growth_method(std::make_shared<tfw::Net2Net>()); }
