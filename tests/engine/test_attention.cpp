// Causal attention and partial rotary embedding against hand-computed values and a loop
// reference; the fused kernel against the manual one where LibTorch >= 2 provides it.
#include <cmath>

#include <gtest/gtest.h>
#include <torch/version.h>

#include "engine/attention.h"
#include "engine/error.h"
#include "tests/support.h"

namespace tfw {
namespace {

TEST(Rotary, DimsAreAQuarterRoundedDownToEven) {
  EXPECT_EQ(rotary_dims(64, 0.25), 16);
  EXPECT_EQ(rotary_dims(8, 0.25), 2);
  EXPECT_EQ(rotary_dims(12, 0.25), 2);   // 3 -> 2
  EXPECT_EQ(rotary_dims(64, 0.0), 0);
}

TEST(Rotary, HandComputedRotateHalfOnFirstQuarter) {
  // dh = 8, 25% -> 2 rotary dims paired (0, 1), inv_freq = base^0 = 1: angle = position.
  torch::Tensor x = torch::arange(1, 9, torch::kFloat64).view({1, 1, 1, 8}).repeat({1, 1, 3, 1});  // (1,1,3,8)
  RotaryTable table = rotary_table(3, 2, 10000.0, torch::TensorOptions().dtype(torch::kFloat64));
  torch::Tensor y = rotary_apply(x, table);
  for (int t = 0; t < 3; ++t) {
    EXPECT_NEAR(y[0][0][t][0].item<double>(), 1 * std::cos(t) - 2 * std::sin(t), 1e-15);
    EXPECT_NEAR(y[0][0][t][1].item<double>(), 2 * std::cos(t) + 1 * std::sin(t), 1e-15);
    for (int j = 2; j < 8; ++j) EXPECT_EQ(y[0][0][t][j].item<double>(), j + 1.0);  // passed through
  }
}

TEST(Rotary, DotProductsDependOnlyOnRelativePosition) {
  torch::manual_seed(1);
  const int T = 12, dh = 32;
  torch::Tensor q = torch::randn({1, 1, 1, dh}, torch::kFloat64).expand({1, 1, T, dh});
  torch::Tensor k = torch::randn({1, 1, 1, dh}, torch::kFloat64).expand({1, 1, T, dh});
  RotaryTable table = rotary_table(T, rotary_dims(dh, 0.25), 10000.0, torch::TensorOptions().dtype(torch::kFloat64));
  torch::Tensor scores = torch::matmul(rotary_apply(q, table), rotary_apply(k, table).transpose(-2, -1))[0][0];  // (T, T)
  for (int shift = 1; shift < 5; ++shift) {
    for (int m = 0; m + shift < T; ++m) {
      EXPECT_NEAR(scores[m + shift][m].item<double>(), scores[shift][0].item<double>(), 1e-12);
    }
  }
}

TEST(CausalAttention, MatchesLoopReferenceAndIsCausal) {
  torch::manual_seed(2);
  const int B = 2, H = 3, T = 5, dh = 4;
  torch::Tensor q = torch::randn({B, H, T, dh}, torch::kFloat64);
  torch::Tensor k = torch::randn({B, H, T, dh}, torch::kFloat64);
  torch::Tensor v = torch::randn({B, H, T, dh}, torch::kFloat64);
  torch::Tensor out = causal_attention(q, k, v, AttentionKernel::manual);
  auto Q = q.accessor<double, 4>(), K = k.accessor<double, 4>(), Vv = v.accessor<double, 4>();
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        std::vector<double> w(t + 1);
        double top = -1e300, total = 0;
        for (int s = 0; s <= t; ++s) {
          w[s] = 0;
          for (int c = 0; c < dh; ++c) w[s] += Q[b][h][t][c] * K[b][h][s][c];
          w[s] /= std::sqrt(static_cast<double>(dh));
          top = std::max(top, w[s]);
        }
        for (double& value : w) total += (value = std::exp(value - top));
        for (int c = 0; c < dh; ++c) {
          double expected = 0;
          for (int s = 0; s <= t; ++s) expected += w[s] / total * Vv[b][h][s][c];
          EXPECT_NEAR(out[b][h][t][c].item<double>(), expected, 1e-12);
        }
      }
    }
  }
}

#if TORCH_VERSION_MAJOR >= 2
TEST(CausalAttention, FusedKernelMatchesManual) {
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    torch::Tensor q = torch::randn({2, 4, 33, 16}, dtype);
    torch::Tensor k = torch::randn({2, 4, 33, 16}, dtype);
    torch::Tensor v = torch::randn({2, 4, 33, 16}, dtype);
    double tolerance = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
    EXPECT_LT(test::max_abs_diff(causal_attention(q, k, v, AttentionKernel::fused),
                                 causal_attention(q, k, v, AttentionKernel::manual)),
              tolerance);
  }
}
#else
TEST(CausalAttention, FusedKernelIsRefusedBeforeLibTorch2) {
  torch::Tensor q = torch::randn({1, 1, 2, 4});
  EXPECT_THROW(causal_attention(q, q, q, AttentionKernel::fused), Error);
}
#endif

}  // namespace
}  // namespace tfw
