// Causal attention and partial rotary embedding against hand-computed values and a loop
// reference; torch's fused kernel against the manual one where LibTorch >= 2 provides it;
// tfw's fused CPU operator (engine/kernels/cpu/attention_fused.h) against the manual composition: output
// and every gradient in float64, float32 and bf16, causal and not, on strided inputs and at
// lengths on, off and below its row block.
#include <cmath>

#include <gtest/gtest.h>
#include <torch/version.h>

#include "engine/nn/attention.h"
#include "engine/core/error.h"
#include "tests/support.h"

namespace tfw {
namespace test_attention {

TEST(Rotary, DimsAreAQuarterRoundedDownToEven) {
  EXPECT_EQ(rotary_dims(64, 0.25), 16);
  EXPECT_EQ(rotary_dims(8, 0.25), 2);
  EXPECT_EQ(rotary_dims(12, 0.25), 2);  // 3 -> 2
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
  torch::Tensor scores =
      torch::matmul(rotary_apply(q, table), rotary_apply(k, table).transpose(-2, -1))[0][0];  // (T, T)
  for (int shift = 1; shift < 5; ++shift) {
    for (int m = 0; m + shift < T; ++m) {
      EXPECT_NEAR(scores[m + shift][m].item<double>(), scores[shift][0].item<double>(), 1e-12);
    }
  }
}

class CausalAttentionKernels : public ::testing::TestWithParam<AttentionKernel> {};

TEST_P(CausalAttentionKernels, MatchesLoopReferenceAndIsCausal) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
  torch::manual_seed(2);
  const int B = 2, H = 3, T = 5, dh = 4;
  torch::Tensor q = torch::randn({B, H, T, dh}, torch::kFloat64);
  torch::Tensor k = torch::randn({B, H, T, dh}, torch::kFloat64);
  torch::Tensor v = torch::randn({B, H, T, dh}, torch::kFloat64);
  torch::Tensor out = causal_attention(q, k, v, GetParam());
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

INSTANTIATE_TEST_SUITE_P(ManualAndCpu, CausalAttentionKernels,
                         ::testing::Values(AttentionKernel::manual, AttentionKernel::cpu));

// Output and the gradients of q, k and v for one upstream gradient, by a kernel.
struct AttentionResult {
  torch::Tensor out, dq, dk, dv;
};
AttentionResult attention_with_grads(const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0,
                                     const torch::Tensor& grad, bool causal, AttentionKernel kernel) {
  torch::Tensor q = q0.detach().requires_grad_(true), k = k0.detach().requires_grad_(true),
                v = v0.detach().requires_grad_(true);
  // multi_head_*: (B, T, H·dh) in and out; q, k and v reach the kernel as strided head views.
  const std::int64_t heads = 3;
  torch::Tensor out = causal ? multi_head_causal_attention(q, k, v, heads, RotaryTable{}, kernel)
                             : multi_head_attention(q, k, v, heads, kernel);
  out.backward(grad);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(FusedCpuAttention, MatchesTheCompositionWithEveryGradientInFloat64) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
  // Lengths below, on and off the causal row block (32), and over several blocks.
  for (std::int64_t T : {1, 7, 32, 33, 70}) {
    for (bool causal : {true, false}) {
      torch::manual_seed(10 + T);
      const std::int64_t B = 2, W = 3 * 8;
      torch::Tensor q = torch::randn({B, T, W}, torch::kFloat64), k = torch::randn({B, T, W}, torch::kFloat64),
                    v = torch::randn({B, T, W}, torch::kFloat64), grad = torch::randn({B, T, W}, torch::kFloat64);
      const AttentionResult fused = attention_with_grads(q, k, v, grad, causal, AttentionKernel::cpu);
      const AttentionResult manual = attention_with_grads(q, k, v, grad, causal, AttentionKernel::manual);
      SCOPED_TRACE(testing::Message() << "T " << T << (causal ? " causal" : " bidirectional"));
      EXPECT_LT(test::max_abs_diff(fused.out, manual.out), 1e-13);
      EXPECT_LT(test::max_abs_diff(fused.dq, manual.dq), 1e-12);
      EXPECT_LT(test::max_abs_diff(fused.dk, manual.dk), 1e-12);
      EXPECT_LT(test::max_abs_diff(fused.dv, manual.dv), 1e-12);
    }
  }
}

TEST(FusedCpuAttention, IsCausalInItsGradients) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
  // A change to the last position's key or value moves no earlier output: its gradients from
  // an upstream gradient on the earlier positions alone are zero, exactly.
  torch::manual_seed(4);
  const std::int64_t B = 1, T = 40, W = 24;
  torch::Tensor q = torch::randn({B, T, W}, torch::kFloat64), k = torch::randn({B, T, W}, torch::kFloat64),
                v = torch::randn({B, T, W}, torch::kFloat64);
  torch::Tensor grad = torch::randn({B, T, W}, torch::kFloat64);
  grad.narrow(1, T - 1, 1).zero_();
  const AttentionResult fused = attention_with_grads(q, k, v, grad, true, AttentionKernel::cpu);
  EXPECT_EQ(fused.dk.narrow(1, T - 1, 1).abs().max().item<double>(), 0.0);
  EXPECT_EQ(fused.dv.narrow(1, T - 1, 1).abs().max().item<double>(), 0.0);
  EXPECT_EQ(fused.dq.narrow(1, T - 1, 1).abs().max().item<double>(), 0.0);
  EXPECT_GT(fused.dk.narrow(1, T - 2, 1).abs().max().item<double>(), 0.0);
}

TEST(FusedCpuAttention, Float32IsWithinOneInOneHundredThousandOfFloat64) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
  torch::manual_seed(5);
  const std::int64_t B = 4, T = 77, W = 48;
  torch::Tensor q = torch::randn({B, T, W}, torch::kFloat64), k = torch::randn({B, T, W}, torch::kFloat64),
                v = torch::randn({B, T, W}, torch::kFloat64), grad = torch::randn({B, T, W}, torch::kFloat64);
  for (bool causal : {true, false}) {
    const AttentionResult wide = attention_with_grads(q, k, v, grad, causal, AttentionKernel::manual);
    const AttentionResult single =
        attention_with_grads(q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32),
                             grad.to(torch::kFloat32), causal, AttentionKernel::cpu);
    EXPECT_EQ(single.out.scalar_type(), torch::kFloat32);
    for (auto [a, b] :
         {std::pair{single.out, wide.out}, {single.dq, wide.dq}, {single.dk, wide.dk}, {single.dv, wide.dv}}) {
      EXPECT_LT(test::max_abs_diff(a.to(torch::kFloat64), b) / b.abs().max().item<double>(), 1e-5);
    }
  }
}

TEST(FusedCpuAttention, Bf16InputsAreComputedInFloat32AndReturnedBf16) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
  torch::manual_seed(6);
  const std::int64_t B = 2, T = 50, W = 24;
  torch::Tensor q = torch::randn({B, T, W}).to(torch::kBFloat16), k = torch::randn({B, T, W}).to(torch::kBFloat16),
                v = torch::randn({B, T, W}).to(torch::kBFloat16), grad = torch::randn({B, T, W}).to(torch::kBFloat16);
  const AttentionResult half = attention_with_grads(q, k, v, grad, true, AttentionKernel::cpu);
  const AttentionResult wide = attention_with_grads(q.to(torch::kFloat64), k.to(torch::kFloat64), v.to(torch::kFloat64),
                                                    grad.to(torch::kFloat64), true, AttentionKernel::manual);
  EXPECT_EQ(half.out.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(half.dq.scalar_type(), torch::kBFloat16);
  // The inputs are exact in both; what differs is float32 arithmetic and the bf16 rounding
  // of the results (2^-8 relative).
  EXPECT_LT(test::max_abs_diff(half.out.to(torch::kFloat64), wide.out) / wide.out.abs().max().item<double>(), 8e-3);
  EXPECT_LT(test::max_abs_diff(half.dk.to(torch::kFloat64), wide.dk) / wide.dk.abs().max().item<double>(), 8e-3);
}

TEST(FusedCpuAttention, IsWhatAutomaticChoosesOnTheCpuAndRefusedElsewhere) {
  EXPECT_EQ(attention_kernel_for(torch::zeros({1, 1, 2, 4})), AttentionKernel::cpu);
  EXPECT_EQ(attention_kernel_for(torch::zeros({1, 1, 2, 4}, torch::kFloat64)), AttentionKernel::cpu);
  EXPECT_NE(attention_kernel_for(torch::zeros({1, 1, 2, 4}, torch::kInt64)), AttentionKernel::cpu);
  torch::Tensor ints = torch::zeros({1, 1, 2, 4}, torch::kInt64);
  EXPECT_THROW(causal_attention(ints, ints, ints, AttentionKernel::cpu), Error);
}

#if TORCH_VERSION_MAJOR >= 2
TEST(CausalAttention, FusedKernelMatchesManual) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
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

}  // namespace test_attention
}  // namespace tfw
