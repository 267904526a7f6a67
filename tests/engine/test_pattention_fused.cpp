// The fused Pattention normalisation against the reference composition: forward and the
// gradient of the scores within 1e-10 in float64 for every norm (with an all-zero row, a
// row of large scores and a row of one repeated value), against central finite
// differences in float64 (away from gelu_l1's kink at zero), and within 1e-5 relative in float32.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/kernels/cpu/pattention_kernels.h"
#include "engine/nn/pattention_fused.h"
#include "tests/support.h"

namespace tfw {
namespace test_pattention_fused {

const std::vector<PattentionNorm> kNorms = {PattentionNorm::l2_gelu, PattentionNorm::gelu_l2, PattentionNorm::gelu_l1,
                                            PattentionNorm::softmax};

double multiplier_of(PattentionNorm norm, std::int64_t n) {
  return norm == PattentionNorm::gelu_l1 || norm == PattentionNorm::softmax ? static_cast<double>(n)
                                                                            : std::sqrt(static_cast<double>(n));
}

// Rows of scores: random, all zero, large, constant; shape (2, 5, n).
torch::Tensor scores(torch::Dtype dtype, std::int64_t n = 13) {
  torch::manual_seed(7);
  torch::Tensor s = torch::randn({2, 5, n}, torch::kFloat64) * 1.7;
  s[0][1].zero_();
  s[1][2].mul_(40);
  s[1][3].fill_(-0.3);
  return s.to(dtype);
}

struct Result {
  torch::Tensor a, ds;
};

Result run(const torch::Tensor& s_in, const torch::Tensor& da, PattentionNorm norm, double eps, bool fused) {
  torch::Tensor s = s_in.detach().clone().requires_grad_(true);
  const double m = multiplier_of(norm, s.size(-1));
  torch::Tensor a = fused ? pattention_scores_normalise_fused(s, norm, m, eps)
                          : pattention_scores_normalise(s, norm, torch::scalar_tensor(m, torch::kFloat64), eps);
  (a * da).sum().backward();
  return {a.detach(), s.grad()};
}

TEST(PattentionFused, MatchesTheReferenceInFloat64) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
  const torch::Tensor s = scores(torch::kFloat64);
  const torch::Tensor da = torch::randn(s.sizes(), torch::kFloat64);
  for (PattentionNorm norm : kNorms) {
    for (double eps : {1e-6, 0.0, 1e-2}) {
      if (eps == 0.0 && norm != PattentionNorm::softmax) continue;  // the all-zero row needs eps > 0
      SCOPED_TRACE(pattention_norm_name(norm) + " eps " + std::to_string(eps));
      const Result fused = run(s, da, norm, eps, true), reference = run(s, da, norm, eps, false);
      EXPECT_LT(test::max_abs_diff(fused.a, reference.a), 1e-10);
      EXPECT_LT(test::max_abs_diff(fused.ds, reference.ds), 1e-10);
      EXPECT_GT(reference.ds.abs().max().item<double>(), 1e-3);  // the gradient is not trivially zero
    }
  }
}

TEST(PattentionFused, GradientMatchesCentralDifferences) {
  const test::TwoThreads threads;                               // the kernels' split between threads, too
  torch::Tensor s = scores(torch::kFloat64, 6).slice(0, 0, 1);  // (1, 5, 6) incl. the zero row
  const torch::Tensor da = torch::randn(s.sizes(), torch::kFloat64);
  const double h = 1e-6;
  for (PattentionNorm norm : kNorms) {
    SCOPED_TRACE(pattention_norm_name(norm));
    const double m = multiplier_of(norm, 6);
    const Result fused = run(s, da, norm, 1e-6, true);
    auto loss = [&](const torch::Tensor& x) {
      return (pattention_scores_normalise_fused(x, norm, m, 1e-6) * da).sum().item<double>();
    };
    double worst = 0;
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      // |g| has a kink at g = 0: on the all-zero row gelu_l1 has only a subgradient (sign 0,
      // as in the reference), which central differences do not see.
      if (norm == PattentionNorm::gelu_l1 && s.view(-1)[i].item<double>() == 0.0) continue;
      torch::Tensor up = s.clone(), down = s.clone();
      up.view(-1)[i] += h;
      down.view(-1)[i] -= h;
      const double numeric = (loss(up) - loss(down)) / (2 * h);
      worst = std::max(worst, std::abs(numeric - fused.ds.view(-1)[i].item<double>()) / (1 + std::abs(numeric)));
    }
    EXPECT_LT(worst, 1e-6);
  }
}

TEST(PattentionFused, MatchesTheReferenceInFloat32) {
  const test::TwoThreads threads;  // the kernels' split between threads, too
  // float32 goes through the AVX2 kernels wherever the CPU has them (n 257: 32 vectors and a
  // scalar tail), with Hastings' erf; the second case sweeps GELU's argument over [-8, 8].
  EXPECT_EQ(pattention_fused_vectorised(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  const torch::Tensor sweep = torch::linspace(-8, 8, 3 * 1029, torch::kFloat32).view({3, -1});
  for (const torch::Tensor& s : {scores(torch::kFloat32, 257), sweep}) {
    const torch::Tensor da = torch::randn(s.sizes(), torch::kFloat32);
    for (PattentionNorm norm : kNorms) {
      SCOPED_TRACE(pattention_norm_name(norm) + " n " + std::to_string(s.size(-1)));
      const Result fused = run(s, da, norm, 1e-6, true);
      const Result exact = run(s.to(torch::kFloat64), da.to(torch::kFloat64), norm, 1e-6, false);
      // Relative to the largest magnitude of each result.
      EXPECT_LT(test::max_abs_diff(fused.a.to(torch::kFloat64), exact.a) / exact.a.abs().max().item<double>(), 1e-5);
      EXPECT_LT(test::max_abs_diff(fused.ds.to(torch::kFloat64), exact.ds) / exact.ds.abs().max().item<double>(), 1e-5);
    }
  }
}

}  // namespace test_pattention_fused
}  // namespace tfw
