// Pattention against hand-computed cases, an independent float64 loop reference, finite
// differences, the eps guard, and the append-zero-keys exactness of docs/design/TOKENFORMER.md §1, §6.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/nn/pattention.h"
#include "engine/nn/pattention_fused.h"
#include "tests/support.h"

namespace tfw {
namespace test_pattention {

// One input token x = (1, 0), keys (1,0), (0,1), (1,1) -> scores s = (1, 0, 1), n0 = 3,
// values (1), (2), (3). Expected outputs worked by hand (eps = 1e-6 only moves digits
// past the 6th):
//   l2_gelu: ||s|| = sqrt2, tau = sqrt3 -> a = gelu(sqrt(3/2)) on tokens 0, 2 = 1.0896114689;
//            O = a·(1 + 3) = 4.3584458757
//   gelu_l2: gelu(s) = (g, 0, g), ||.|| = g·sqrt2 -> a = sqrt(3/2) -> O = 4·sqrt(1.5) = 4.8989794856
//   gelu_l1: a = 3·g / (2g) = 1.5 -> O = 6 (less 6 parts in 10^6 from eps: 5.9999964343)
//   softmax: a = 3·e^s / (2e + 1) -> O = 3·(e + 2 + 3e) / (2e + 1) = 6
struct HandCase {
  PattentionNorm norm;
  double a0, a1, output, tolerance;
};

Pattention hand_layer(PattentionNorm norm) {
  Pattention layer(PattentionOptions(2, 1, 3).norm(norm));
  layer->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  layer->keys.copy_(torch::tensor({{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}}, torch::kFloat64));
  layer->values.copy_(torch::tensor({{1.0}, {2.0}, {3.0}}, torch::kFloat64));
  return layer;
}

TEST(Pattention, HandComputedCaseForEachNorm) {
  const double e = std::exp(1.0);
  const std::vector<HandCase> cases = {
      {PattentionNorm::l2_gelu, 1.089611468933983, 0.0, 4.358445875735932, 1e-12},
      {PattentionNorm::gelu_l2, std::sqrt(1.5), 0.0, 4.0 * std::sqrt(1.5), 1e-5},
      {PattentionNorm::gelu_l1, 1.5, 0.0, 6.0, 1e-5},
      {PattentionNorm::softmax, 3 * e / (2 * e + 1), 3 / (2 * e + 1), 6.0, 1e-12},
  };
  for (const HandCase& c : cases) {
    SCOPED_TRACE(pattention_norm_name(c.norm));
    Pattention layer = hand_layer(c.norm);
    torch::Tensor x = torch::tensor({{1.0, 0.0}}, torch::kFloat64);  // (1, 2)
    ScoreCapture capture;
    torch::Tensor out = layer->forward(x);  // (1, 1)
    ASSERT_EQ(out.sizes(), (std::vector<std::int64_t>{1, 1}));
    EXPECT_NEAR(out.item<double>(), c.output, c.tolerance);
    torch::Tensor a = capture.scores().at("");  // (1, 3)
    EXPECT_NEAR(a[0][0].item<double>(), c.a0, c.tolerance);
    EXPECT_NEAR(a[0][1].item<double>(), c.a1, c.tolerance);
    EXPECT_NEAR(a[0][2].item<double>(), c.a0, c.tolerance);
  }
}

// An independent float64 implementation with plain loops and std::erf.
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

std::vector<double> reference(const std::vector<double>& x, const std::vector<double>& k, const std::vector<double>& v,
                              int rows, int d_in, int n, int d_out, PattentionNorm norm, double multiplier,
                              double eps) {
  std::vector<double> out(rows * d_out, 0.0);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> s(n), a(n);
    for (int j = 0; j < n; ++j) {
      s[j] = 0;
      for (int c = 0; c < d_in; ++c) s[j] += x[r * d_in + c] * k[j * d_in + c];
    }
    double total = 0;
    if (norm == PattentionNorm::l2_gelu) {
      for (double value : s) total += value * value;
      for (int j = 0; j < n; ++j) a[j] = gelu(multiplier * s[j] / std::sqrt(total + eps));
    } else if (norm == PattentionNorm::gelu_l2) {
      for (double value : s) total += gelu(value) * gelu(value);
      for (int j = 0; j < n; ++j) a[j] = multiplier * gelu(s[j]) / std::sqrt(total + eps);
    } else if (norm == PattentionNorm::gelu_l1) {
      for (double value : s) total += std::fabs(gelu(value));
      for (int j = 0; j < n; ++j) a[j] = multiplier * gelu(s[j]) / (total + eps);
    } else {
      double top = *std::max_element(s.begin(), s.end());
      for (double value : s) total += std::exp(value - top);
      for (int j = 0; j < n; ++j) a[j] = multiplier * std::exp(s[j] - top) / total;
    }
    for (int o = 0; o < d_out; ++o) {
      for (int j = 0; j < n; ++j) out[r * d_out + o] += a[j] * v[j * d_out + o];
    }
  }
  return out;
}

std::vector<double> to_vector(const torch::Tensor& t) {
  torch::Tensor flat = t.to(torch::kFloat64).contiguous().view({-1});
  return std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
}

TEST(Pattention, MatchesFloat64LoopReferenceForEveryNorm) {
  const int B = 2, T = 3, d_in = 5, n = 7, d_out = 4;  // d_in differs from d_out on purpose
  for (PattentionNorm norm :
       {PattentionNorm::l2_gelu, PattentionNorm::gelu_l2, PattentionNorm::gelu_l1, PattentionNorm::softmax}) {
    SCOPED_TRACE(pattention_norm_name(norm));
    torch::manual_seed(7);
    Pattention layer(PattentionOptions(d_in, d_out, n).norm(norm).key_std(0.5).value_std(0.5));
    layer->to(torch::kFloat64);
    torch::Tensor x = torch::randn({B, T, d_in}, torch::kFloat64);
    const bool l1 = norm == PattentionNorm::gelu_l1 || norm == PattentionNorm::softmax;
    std::vector<double> expected = reference(to_vector(x), to_vector(layer->keys), to_vector(layer->values), B * T,
                                             d_in, n, d_out, norm, l1 ? n : std::sqrt(n), 1e-6);
    torch::Tensor out = layer->forward(x);
    ASSERT_EQ(out.sizes(), (std::vector<std::int64_t>{B, T, d_out}));
    std::vector<double> got = to_vector(out);
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12) << "element " << i;

    // float32 agrees with the float64 reference to float32 rounding.
    layer->to(torch::kFloat32);
    std::vector<double> got32 = to_vector(layer->forward(x.to(torch::kFloat32)));
    for (std::size_t i = 0; i < got32.size(); ++i) EXPECT_NEAR(got32[i], expected[i], 1e-5) << "element " << i;
  }
}

TEST(Pattention, GradientsMatchFiniteDifferencesInFloat64) {
  const int T = 3, d_in = 4, n = 5, d_out = 3;
  for (PattentionNorm norm :
       {PattentionNorm::l2_gelu, PattentionNorm::gelu_l2, PattentionNorm::gelu_l1, PattentionNorm::softmax}) {
    SCOPED_TRACE(pattention_norm_name(norm));
    torch::manual_seed(3);
    Pattention layer(PattentionOptions(d_in, d_out, n).norm(norm).key_std(0.7).value_std(0.7));
    layer->to(torch::kFloat64);
    torch::Tensor x = torch::randn({T, d_in}, torch::kFloat64).requires_grad_(true);
    torch::Tensor weights = torch::randn({T, d_out}, torch::kFloat64);  // loss = sum(O ⊙ weights)
    auto loss_of = [&] { return (layer->forward(x) * weights).sum(); };
    loss_of().backward();
    std::vector<std::pair<std::string, torch::Tensor>> inputs = {
        {"x", x}, {"keys", layer->keys}, {"values", layer->values}};
    for (auto& [name, tensor] : inputs) {
      torch::Tensor analytic = tensor.grad().clone();
      torch::NoGradGuard no_grad;
      torch::Tensor flat = tensor.view({-1});
      for (std::int64_t i = 0; i < flat.numel(); ++i) {
        const double h = 1e-6, saved = flat[i].item<double>();
        flat[i] = saved + h;
        double plus = loss_of().item<double>();
        flat[i] = saved - h;
        double minus = loss_of().item<double>();
        flat[i] = saved;
        double numeric = (plus - minus) / (2 * h);
        EXPECT_NEAR(analytic.view({-1})[i].item<double>(), numeric, 1e-7 * std::max(1.0, std::fabs(numeric)))
            << name << "[" << i << "]";
      }
    }
  }
}

TEST(Pattention, EpsGuardsAnAllZeroScoreRow) {
  for (PattentionNorm norm :
       {PattentionNorm::l2_gelu, PattentionNorm::gelu_l2, PattentionNorm::gelu_l1, PattentionNorm::softmax}) {
    SCOPED_TRACE(pattention_norm_name(norm));
    Pattention layer(PattentionOptions(3, 2, 4).norm(norm));
    torch::Tensor x = torch::zeros({1, 3}).requires_grad_(true);  // every score is exactly 0
    torch::Tensor out = layer->forward(x);
    out.sum().backward();
    EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(layer->keys.grad()).all().item<bool>());
    if (norm == PattentionNorm::softmax) {
      // Uniform weights n0 · 1/n = 1: the output is the sum of the values.
      EXPECT_LT(tfw::test::max_abs_diff(out[0], layer->values.sum(0)), 1e-6);
    } else {
      EXPECT_EQ(out.abs().max().item<float>(), 0.0f);  // gelu(0) = 0 for every token
    }
  }
}

// Appends m zero keys with random values and returns the largest output change, float64.
double append_zero_keys_change(PattentionNorm norm, TauMode tau, torch::Dtype dtype = torch::kFloat64) {
  torch::manual_seed(11);
  Pattention layer(PattentionOptions(6, 6, 8).norm(norm).tau_mode(tau).key_std(0.3).value_std(0.3));
  layer->to(dtype);
  torch::Tensor x = torch::randn({2, 5, 6}, dtype);
  torch::Tensor before = layer->forward(x).detach();
  layer->append_tokens(torch::zeros({4, 6}, dtype), torch::randn({4, 6}, dtype));
  EXPECT_EQ(layer->tokens(), 12);
  EXPECT_EQ(layer->tokens_at_creation(), 8);
  return tfw::test::max_abs_diff(layer->forward(x), before);
}

TEST(Pattention, AppendingZeroKeysKeepsOutputWithFixedTau) {
  // With either implementation; in float32 the fused kernels' rows grow from one full vector
  // (8) to a vector and a scalar tail (12), so the sums add in another order: float rounding.
  for (PattentionImplementation implementation :
       {PattentionImplementation::fused, PattentionImplementation::reference}) {
    pattention_set_implementation(implementation);
    for (PattentionNorm norm : {PattentionNorm::l2_gelu, PattentionNorm::gelu_l2, PattentionNorm::gelu_l1}) {
      SCOPED_TRACE(pattention_norm_name(norm) +
                   (implementation == PattentionImplementation::fused ? " fused" : " ref"));
      EXPECT_LT(append_zero_keys_change(norm, TauMode::fixed), 1e-12);
      EXPECT_LT(append_zero_keys_change(norm, TauMode::fixed, torch::kFloat32), 1e-6);
    }
  }
  pattention_set_implementation(PattentionImplementation::fused);
}

TEST(Pattention, AppendingZeroKeysChangesOutputWithSqrtNOrSoftmax) {
  EXPECT_GT(append_zero_keys_change(PattentionNorm::l2_gelu, TauMode::sqrt_n), 1e-3);
  EXPECT_GT(append_zero_keys_change(PattentionNorm::softmax, TauMode::fixed), 1e-3);
}

TEST(Pattention, AppendKeepsParameterIdentityAndOldRows) {
  Pattention layer(PattentionOptions(3, 2, 4));
  torch::Tensor old_keys = layer->keys.detach().clone();
  const void* registered_before = layer->named_parameters()["keys"].unsafeGetTensorImpl();
  layer->append_tokens(torch::ones({2, 3}), torch::ones({2, 2}));
  EXPECT_EQ(layer->named_parameters()["keys"].unsafeGetTensorImpl(), registered_before);
  EXPECT_EQ(layer->named_parameters()["keys"].sizes(), (std::vector<std::int64_t>{6, 3}));
  EXPECT_TRUE(torch::equal(layer->keys.narrow(0, 0, 4), old_keys));
  EXPECT_TRUE(layer->keys.requires_grad());
  EXPECT_THROW(layer->append_tokens(torch::ones({2, 4}), torch::ones({2, 2})), UsageError);
}

TEST(Pattention, TauAndN0AreSavedBuffers) {
  Pattention layer(PattentionOptions(3, 2, 16));
  auto buffers = layer->named_buffers();
  EXPECT_DOUBLE_EQ(buffers["tau"].item<double>(), 4.0);
  EXPECT_EQ(buffers["n0"].item<std::int64_t>(), 16);
}

TEST(Pattention, ScoreCaptureIsOffByDefaultAndFiltersByLabel) {
  Pattention q(PattentionOptions(4, 4, 6).label("layers.0.q"));
  Pattention k(PattentionOptions(4, 4, 5).label("layers.0.k"));
  torch::Tensor x = torch::randn({1, 3, 4});
  EXPECT_EQ(ScoreCapture::active(), nullptr);
  {
    ScoreCapture capture({"layers.0.k"});
    q->forward(x);
    k->forward(x);
    ASSERT_EQ(capture.scores().size(), 1u);
    EXPECT_EQ(capture.scores().at("layers.0.k").sizes(), (std::vector<std::int64_t>{1, 3, 5}));
  }
  EXPECT_EQ(ScoreCapture::active(), nullptr);
}

}  // namespace test_pattention
}  // namespace tfw
