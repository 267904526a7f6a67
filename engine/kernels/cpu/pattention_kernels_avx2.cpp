// The float32 row kernels of the fused Pattention normalisation, vectorised with ATen's
// Vectorized<float> (8 lanes of AVX2; exp and erfc our own, below). This file alone is
// compiled with -mavx2 -mfma (engine/CMakeLists.txt); pattention_fused.cpp calls it only when
// avx2_available() says the CPU has both. It includes no torch header beyond ATen's vector
// types, so that no AVX2 copy of a shared inline function can reach the rest of the engine.
// The formulas are those of pattention_fused.cpp; the row sums accumulate in float lanes and
// are added in double. Columns past the last full vector go through the scalar tail.
#include "engine/kernels/cpu/pattention_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if !defined(CPU_CAPABILITY_AVX2)
#error "pattention_kernels_avx2.cpp must be compiled with CPU_CAPABILITY_AVX2 (see engine/CMakeLists.txt)"
#endif
#include <ATen/cpu/vec/vec.h>
#include <immintrin.h>

namespace tfw::pattention_kernels {

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr std::int64_t kLanes = Vec::size();
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

double sum_lanes(const Vec& v) {
  float lanes[kLanes];
  v.store(lanes);
  double total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

// e^x for 8 lanes, inline: SLEEF's expf is a call per vector and handled a third of the
// kernels' time. Cody-Waite reduction x = n ln2 + r, |r| ≤ ln2/2, then e^r by its Taylor
// polynomial to r⁷/7! (truncation ≤ 5e-9 relative) and 2^n through the exponent bits.
// x is clamped below at −87.3 (e^x ≈ 1e-38 instead of 0 or a denormal); NaN stays NaN.
inline Vec exp_of(const Vec& x_in) {
  const __m256 x = _mm256_max_ps(_mm256_set1_ps(-87.3f), x_in);  // max returns its 2nd operand if NaN
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln2 in two parts
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) {
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  }
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return Vec(_mm256_mul_ps(p, _mm256_castsi256_ps(scale)));
}

// Φ(x) = ½(1 + erf(x/√2)); gelu(x) = x Φ(x); gelu'(x) = Φ(x) + x φ(x). SLEEF's erff (1 ulp)
// costs about 2.6 ns an element here, five times what the whole of torch's GELU costs, so the
// vector path has its own erfc, accurate in relative terms for every z ≥ 0:
//   erfc(z) ≈ t·Q(t)·e^(−z²),  t = 1/(1 + z/2),  Q of degree 8,
// fitted by scripts/fit_erfc.py (largest relative error of Q 2.2e-7, evaluated in float32).
// Φ is formed from erfc on both sides (Φ(x) = ½erfc(|x|/√2) for x ≤ 0), so that GELU keeps its
// relative accuracy in the far negative tail, where the L2 and L1 norms of a row of negative
// scores divide by small numbers (a form with only an absolute error bound, Hastings', failed
// the float32 test there). With z = |x|/√2, e^(−z²) = e^(−x²/2) = √(2π) φ(x): GELU and its
// derivative take one exponential between them.
constexpr float kErfcxPoly[] = {0.28208447848154794f,  0.282409499879552f,     0.24285403959405347f,
                                0.20367793661065053f,  -0.028973598918065793f, 0.28148207771156514f,
                                -0.49018969521230504f, 0.28602091299760934f,   -0.059365695513255101f};
struct Gauss {
  Vec cdf;    // Φ(x)
  Vec gauss;  // e^(−x²/2)
};
inline Gauss cdf_and_gauss(const Vec& x) {
  const Vec z = x.abs() * Vec(kInvSqrt2);
  const Vec t = Vec(1.0f) / at::vec::fmadd(Vec(0.5f), z, Vec(1.0f));
  Vec q(kErfcxPoly[8]);
  for (int k = 7; k >= 0; --k) q = at::vec::fmadd(q, t, Vec(kErfcxPoly[k]));
  const Vec gauss = exp_of(Vec(-0.5f) * x * x);
  const Vec half_erfc = Vec(0.5f) * t * q * gauss;
  return {Vec::blendv(half_erfc, Vec(1.0f) - half_erfc, x > Vec(0.0f)), gauss};
}
inline Vec gelu(const Vec& x) { return x * cdf_and_gauss(x).cdf; }
inline Vec gelu_grad(const Vec& x) {  // φ(x) = e^(−x²/2)/√(2π)
  const Gauss g = cdf_and_gauss(x);
  return at::vec::fmadd(x * Vec(kInvSqrt2Pi), g.gauss, g.cdf);
}
inline float cdf(float x) { return 0.5f * (1.0f + std::erf(x * kInvSqrt2)); }
inline float gelu(float x) { return x * cdf(x); }
inline float gelu_grad(float x) { return cdf(x) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x); }

enum Norm { l2_gelu = 0, gelu_l2 = 1, gelu_l1 = 2, softmax = 3 };

void forward_row(const float* x, float* y, double* stat, std::int64_t n, int norm, double m, double eps) {
  const std::int64_t body = n - n % kLanes;
  switch (norm) {
    case l2_gelu: {
      Vec acc(0.0f);
      std::int64_t j = 0;
      for (; j < body; j += kLanes) {
        const Vec v = Vec::loadu(x + j);
        acc = at::vec::fmadd(v, v, acc);
      }
      double sum = sum_lanes(acc);
      for (; j < n; ++j) sum += static_cast<double>(x[j]) * x[j];
      const double r = 1.0 / std::sqrt(sum + eps);
      *stat = r;
      const float scale = static_cast<float>(m * r);
      for (j = 0; j < body; j += kLanes) gelu(Vec::loadu(x + j) * Vec(scale)).store(y + j);
      for (; j < n; ++j) y[j] = gelu(x[j] * scale);
      return;
    }
    case gelu_l2:
    case gelu_l1: {
      const bool l2 = norm == gelu_l2;
      Vec acc(0.0f);
      std::int64_t j = 0;
      for (; j < body; j += kLanes) {
        const Vec g = gelu(Vec::loadu(x + j));
        g.store(y + j);
        acc = l2 ? at::vec::fmadd(g, g, acc) : acc + g.abs();
      }
      double sum = sum_lanes(acc);
      for (; j < n; ++j) {
        y[j] = gelu(x[j]);
        sum += l2 ? static_cast<double>(y[j]) * y[j] : std::abs(static_cast<double>(y[j]));
      }
      const double statistic = l2 ? 1.0 / std::sqrt(sum + eps) : sum + eps;
      *stat = statistic;
      const float scale = static_cast<float>(l2 ? m * statistic : m / statistic);
      for (j = 0; j < body; j += kLanes) (Vec::loadu(y + j) * Vec(scale)).store(y + j);
      for (; j < n; ++j) y[j] *= scale;
      return;
    }
    case softmax: {
      float high = x[0];
      std::int64_t j = 0;
      if (body > 0) {
        Vec top = Vec::loadu(x);
        for (j = kLanes; j < body; j += kLanes) top = at::vec::maximum(top, Vec::loadu(x + j));
        float lanes[kLanes];
        top.store(lanes);
        high = *std::max_element(lanes, lanes + kLanes);
      }
      for (; j < n; ++j) high = std::max(high, x[j]);
      Vec acc(0.0f);
      for (j = 0; j < body; j += kLanes) {
        const Vec e = exp_of(Vec::loadu(x + j) - Vec(high));
        e.store(y + j);
        acc = acc + e;
      }
      double sum = sum_lanes(acc);
      for (; j < n; ++j) {
        y[j] = std::exp(x[j] - high);
        sum += y[j];
      }
      const float scale = static_cast<float>(m / sum);
      for (j = 0; j < body; j += kLanes) (Vec::loadu(y + j) * Vec(scale)).store(y + j);
      for (; j < n; ++j) y[j] *= scale;
      return;
    }
  }
}

void backward_row(const float* x, double stat, const float* dy, float* dx, std::int64_t n, int norm, double m) {
  const std::int64_t body = n - n % kLanes;
  switch (norm) {
    case l2_gelu: {
      // du = da·gelu'(m r s), kept in dx; c = Σ du·s; ds = m r du − m r³ c s.
      const double r = stat;
      const float scale = static_cast<float>(m * r);
      Vec acc(0.0f);
      std::int64_t j = 0;
      for (; j < body; j += kLanes) {
        const Vec v = Vec::loadu(x + j);
        const Vec du = Vec::loadu(dy + j) * gelu_grad(v * Vec(scale));
        du.store(dx + j);
        acc = at::vec::fmadd(du, v, acc);
      }
      double c = sum_lanes(acc);
      for (; j < n; ++j) {
        dx[j] = dy[j] * gelu_grad(x[j] * scale);
        c += static_cast<double>(dx[j]) * x[j];
      }
      const float k = static_cast<float>(m * r * r * r * c);
      for (j = 0; j < body; j += kLanes) {
        (Vec(scale) * Vec::loadu(dx + j) - Vec(k) * Vec::loadu(x + j)).store(dx + j);
      }
      for (; j < n; ++j) dx[j] = scale * dx[j] - k * x[j];
      return;
    }
    case gelu_l2:
    case gelu_l1: {
      // g = gelu(s), kept in dx; c = Σ da·g; ds = gelu'(s)·(direct da − k through(g)).
      const bool l2 = norm == gelu_l2;
      Vec acc(0.0f);
      std::int64_t j = 0;
      for (; j < body; j += kLanes) {
        const Vec g = gelu(Vec::loadu(x + j));
        g.store(dx + j);
        acc = at::vec::fmadd(Vec::loadu(dy + j), g, acc);
      }
      double c = sum_lanes(acc);
      for (; j < n; ++j) {
        dx[j] = gelu(x[j]);
        c += static_cast<double>(dy[j]) * dx[j];
      }
      const float direct = static_cast<float>(l2 ? m * stat : m / stat);
      const float k = static_cast<float>(l2 ? m * stat * stat * stat * c : m * c / (stat * stat));
      for (j = 0; j < body; j += kLanes) {
        const Vec g = Vec::loadu(dx + j);
        const Vec through = l2 ? g : g.gt(Vec(0.0f)) - g.lt(Vec(0.0f));
        (gelu_grad(Vec::loadu(x + j)) * (Vec(direct) * Vec::loadu(dy + j) - Vec(k) * through)).store(dx + j);
      }
      for (; j < n; ++j) {
        const float g = dx[j];
        const float through = l2 ? g : static_cast<float>((g > 0) - (g < 0));
        dx[j] = gelu_grad(x[j]) * (direct * dy[j] - k * through);
      }
      return;
    }
    case softmax: {
      // x is the output a; c = Σ da·a; ds = a·(da − c/m).
      Vec acc(0.0f);
      std::int64_t j = 0;
      for (; j < body; j += kLanes) acc = at::vec::fmadd(Vec::loadu(dy + j), Vec::loadu(x + j), acc);
      double c = sum_lanes(acc);
      for (; j < n; ++j) c += static_cast<double>(dy[j]) * x[j];
      const float k = static_cast<float>(c / m);
      for (j = 0; j < body; j += kLanes) (Vec::loadu(x + j) * (Vec::loadu(dy + j) - Vec(k))).store(dx + j);
      for (; j < n; ++j) dx[j] = x[j] * (dy[j] - k);
      return;
    }
  }
}

// bf16 is the top half of a float32; rounding back is to nearest, ties to even (NaN stays NaN).
// Plain loops: the compiler vectorises them with this file's AVX2 flags.
void widen(const std::uint16_t* in, float* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint32_t bits = static_cast<std::uint32_t>(in[j]) << 16;
    std::memcpy(out + j, &bits, sizeof bits);
  }
}

void narrow(const float* in, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) {
    std::uint32_t bits;
    std::memcpy(&bits, in + j, sizeof bits);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    out[j] = static_cast<std::uint16_t>(nan ? 0x7fc0u : rounded);
  }
}

float* scratch(std::int64_t floats) {
  thread_local std::vector<float> buffer;
  if (static_cast<std::int64_t>(buffer.size()) < floats) buffer.resize(static_cast<std::size_t>(floats));
  return buffer.data();
}

}  // namespace

void forward_bf16_avx2(const std::uint16_t* s, std::uint16_t* a, double* stat, std::int64_t begin, std::int64_t end,
                       std::int64_t n, int norm, double multiplier, double eps) {
  float* x = scratch(2 * n);
  float* y = x + n;
  for (std::int64_t row = begin; row < end; ++row) {
    widen(s + row * n, x, n);
    forward_row(x, y, stat + row, n, norm, multiplier, eps);
    narrow(y, a + row * n, n);
  }
}

void backward_bf16_avx2(const std::uint16_t* saved, const double* stat, const std::uint16_t* da, std::uint16_t* ds,
                        std::int64_t begin, std::int64_t end, std::int64_t n, int norm, double multiplier) {
  float* x = scratch(3 * n);
  float* dy = x + n;
  float* dx = dy + n;
  for (std::int64_t row = begin; row < end; ++row) {
    widen(saved + row * n, x, n);
    widen(da + row * n, dy, n);
    backward_row(x, stat[row], dy, dx, n, norm, multiplier);
    narrow(dx, ds + row * n, n);
  }
}

void forward_avx2(const float* s, float* a, double* stat, std::int64_t begin, std::int64_t end, std::int64_t n,
                  int norm, double multiplier, double eps) {
  for (std::int64_t row = begin; row < end; ++row) {
    forward_row(s + row * n, a + row * n, stat + row, n, norm, multiplier, eps);
  }
}

void backward_avx2(const float* saved, const double* stat, const float* da, float* ds, std::int64_t begin,
                   std::int64_t end, std::int64_t n, int norm, double multiplier) {
  for (std::int64_t row = begin; row < end; ++row) {
    backward_row(saved + row * n, stat[row], da + row * n, ds + row * n, n, norm, multiplier);
  }
}

}  // namespace tfw::pattention_kernels
