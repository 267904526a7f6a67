// The growth cases of docs/design/GROWTH.md §4, one per row with its tolerance, shared by the
// CPU suite (tests/plugins/test_growth.cpp) and the GPU suite (tests/gpu/), which runs the same
// cases on a CUDA device.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/nn/growth.h"
#include "engine/nn/model.h"
#include "tests/support.h"

namespace tfw::test {

inline std::string tokenformer(std::int64_t n_attn, std::int64_t n_ffn, const std::string& norm = "l2_gelu",
                               const std::string& tau = "fixed", std::int64_t layers = 2) {
  return fmt::format(R"(family = "tokenformer"
[model]
layers = {}
d = 16
heads = 2
n_attn = {}
n_ffn = {}
vocab = 30
[model.pattention]
norm = "{}"
tau = "{}"
[model.init]
key_std = 0.3
value_std = 0.3
)",
                     layers, n_attn, n_ffn, norm, tau);
}

inline std::string transformer(std::int64_t d, std::int64_t heads, std::int64_t d_ffn, bool bias = false,
                               std::int64_t layers = 2) {
  return fmt::format(R"(family = "transformer"
[model]
layers = {}
d = {}
heads = {}
head_dim = 4
d_ffn = {}
vocab = 30
[model.linear]
bias = {}
[model.init]
std = 0.2
)",
                     layers, d, heads, d_ffn, bias ? "true" : "false");
}

struct GrowthCase {
  std::string name;
  std::string from, to;
  std::string method;
  std::string options;  // TOML
  bool exact;           // expected: declared by the method and measured
  double float64_tolerance = 1e-10;
  double float32_tolerance = 1e-4;  // relative to the logits' scale
};

inline std::vector<GrowthCase> growth_cases() {
  std::vector<GrowthCase> cases;
  // Row 1: Pattention-grow with zero keys and fixed tau is exact for the L2/L1 GELU norms.
  for (const char* norm : {"l2_gelu", "gelu_l2", "gelu_l1"}) {
    cases.push_back({fmt::format("pattention_grow {} zero keys fixed tau", norm), tokenformer(12, 20, norm),
                     tokenformer(20, 32, norm), "pattention_grow", "", true});
  }
  // ... and not exact for softmax, normal key init, and tau = sqrt_n.
  cases.push_back({"pattention_grow softmax", tokenformer(12, 20, "softmax"), tokenformer(20, 32, "softmax"),
                   "pattention_grow", "", false});
  cases.push_back({"pattention_grow normal keys", tokenformer(12, 20), tokenformer(20, 32), "pattention_grow",
                   "key_init = \"normal\"", false});
  cases.push_back({"pattention_grow tau sqrt_n option", tokenformer(12, 20), tokenformer(20, 32), "pattention_grow",
                   "tau = \"sqrt_n\"", false});
  cases.push_back({"pattention_grow model with tau sqrt_n", tokenformer(12, 20, "l2_gelu", "sqrt_n"),
                   tokenformer(20, 32, "l2_gelu", "sqrt_n"), "pattention_grow", "", false});
  // A model whose scale follows n (an imported official one) grown into tau = fixed keeps its
  // scale: exact; the other way round it is not.
  cases.push_back({"pattention_grow tau sqrt_n model into fixed", tokenformer(12, 20, "l2_gelu", "sqrt_n"),
                   tokenformer(20, 32, "l2_gelu", "fixed"), "pattention_grow", "", true});
  cases.push_back({"pattention_grow tau fixed model into sqrt_n", tokenformer(12, 20),
                   tokenformer(20, 32, "l2_gelu", "sqrt_n"), "pattention_grow", "", false});
  // Row 3: HyperCloning (k, m), with and without biases and noise: exact.
  for (auto [k, m] : std::vector<std::pair<int, int>>{{2, 2}, {3, 1}, {1, 4}, {2, 3}}) {
    for (bool bias : {false, true}) {
      for (const char* noise : {"noise = false", "noise = true"}) {
        cases.push_back({fmt::format("hypercloning k={} m={} bias={} {}", k, m, bias, noise),
                         transformer(8, 2, 12, bias), transformer(8 * k, 2 * k, 12 * m, bias), "hypercloning", noise,
                         true});
      }
    }
  }
  // Row 5: Net2Net FFN width and heads: exact, with zero-sum noise too.
  for (const char* noise : {"noise = \"none\"", "noise = \"zero_sum\""}) {
    cases.push_back({fmt::format("net2net ffn {}", noise), transformer(8, 2, 12, true), transformer(8, 2, 19, true),
                     "net2net", noise, true});
    cases.push_back({fmt::format("net2net heads {}", noise), transformer(8, 2, 12, true), transformer(8, 3, 12, true),
                     "net2net", noise, true});
    cases.push_back({fmt::format("net2net heads and ffn {}", noise), transformer(8, 2, 12), transformer(8, 5, 30),
                     "net2net", noise, true});
  }
  cases.push_back({"net2net ffn gaussian noise", transformer(8, 2, 12), transformer(8, 2, 19), "net2net",
                   "noise = \"gaussian\"\nnoise_scale = 0.5", false});
  // Row 6: Net2Net hidden width: a random map is approximate, a uniform map with equal counts exact.
  cases.push_back({"net2net hidden random map", transformer(8, 2, 12), transformer(11, 2, 12), "net2net", "", false});
  cases.push_back({"net2net hidden uniform map", transformer(8, 2, 12), transformer(16, 2, 12), "net2net",
                   "map = \"uniform\"", true});
  // Row 8: depth_grow (both families) is exact wherever it inserts and however it initialises
  // the new layers; stack (G_stack) is not.
  for (const char* at : {"interleave", "top", "bottom"}) {
    for (const char* init : {"copy", "fresh"}) {
      const std::string options = fmt::format("at = \"{}\"\ninit = \"{}\"", at, init);
      cases.push_back({fmt::format("depth_grow tokenformer {} {}", at, init), tokenformer(12, 20),
                       tokenformer(12, 20, "l2_gelu", "fixed", 5), "depth_grow", options, true});
      cases.push_back({fmt::format("depth_grow transformer bias {} {}", at, init), transformer(8, 2, 12, true),
                       transformer(8, 2, 12, true, 4), "depth_grow", options, true});
    }
  }
  cases.push_back(
      {"stack tokenformer x2", tokenformer(12, 20), tokenformer(12, 20, "l2_gelu", "fixed", 4), "stack", "", false});
  cases.push_back({"stack transformer x3", transformer(8, 2, 12), transformer(8, 2, 12, false, 6), "stack", "", false});
  // Row 9: msg (Masked Structural Growth) is exact at the growth, in every dimension and where
  // new layers go, whatever the new weights: its masks start at 0.
  cases.push_back({"msg transformer d heads d_ffn", transformer(8, 2, 12), transformer(12, 3, 20), "msg", "", true});
  cases.push_back({"msg transformer bias all at once", transformer(8, 2, 12, true), transformer(12, 3, 20, true, 3),
                   "msg", "at = \"interleave\"", true});
  for (const char* at : {"top", "bottom", "interleave"}) {
    cases.push_back({fmt::format("msg transformer depth {}", at), transformer(8, 2, 12),
                     transformer(8, 2, 12, false, 5), "msg", fmt::format("at = \"{}\"\nramp_steps = 7", at), true});
  }
  return cases;
}

struct Grown {
  std::shared_ptr<Model> small, grown;
  GrowthPlan plan;
  ModelConfig to;
};

// Builds the case's small model (seed), and a copy grown by its method, both of `dtype` on
// `device` (growth runs where the model is, as in the trainer).
inline Grown grow(const GrowthCase& c, torch::ScalarType dtype, std::uint64_t seed,
                  torch::Device device = torch::kCPU) {
  ModelConfig from = config_from_text(c.from), to = config_from_text(c.to);
  toml::table options = toml::parse(c.options);
  const ModelFamily& family = plugins().family(from.family);
  const GrowthMethod& method = plugins().growth_method(c.method);
  Grown out;
  out.plan = method.plan(*from.spec, *to.spec, options);
  to.spec = growth_grown_spec(family, method, *from.spec, *to.spec, options, 0);  // as tfw grow does
  out.to = to;
  out.small = family.build(*from.spec, seed);
  out.small->to(device, dtype);
  // A copy, so that in-place growth leaves `small` intact for the comparison.
  auto working = family.build(*from.spec, seed);
  working->to(device, dtype);
  out.grown = method.apply(*working, family, *from.spec, *to.spec, options, seed + 100);
  return out;
}

}  // namespace tfw::test
