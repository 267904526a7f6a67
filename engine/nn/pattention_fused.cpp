// See pattention_fused.h and docs/design/TOKENFORMER.md §1. Per row s of n scores, with
// multiplier m (tau or n0) and g = gelu(s), the exact (erf) GELU:
//   l2_gelu  r = (Σ s² + eps)^-½        a = gelu(m r s)
//            ds = m r du − m r³ s Σ(du·s),           du = da·gelu'(m r s)
//   gelu_l2  r = (Σ g² + eps)^-½        a = m r g
//            ds = gelu'(s)·(m r da − m r³ g Σ(da·g))
//   gelu_l1  z = Σ|g| + eps             a = m g / z
//            ds = gelu'(s)·(m da / z − m sign(g) Σ(da·g) / z²)
//   softmax  p = softmax(s)             a = m p
//            ds = a·(da − Σ(da·a) / m)
// Saved for the backward: the scores s and the row statistic (r or z, one number a row)
// for the GELU variants, since gelu is not invertible and the backward needs s; the output
// a for softmax, which the following matmul (a·V) keeps for its own backward anyway, so it
// costs no memory. The reference composition keeps two to three (rows, n) intermediates.
// Row sums accumulate in double.
#include "engine/nn/pattention_fused.h"

#include <cmath>
#include <cstdlib>
#include <type_traits>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "engine/kernels/cuda/torch_cuda.h"
#include "engine/machine/device.h"
#include "engine/core/env_choice.h"
#include "engine/core/error.h"
#include "engine/kernels/cuda/pattention_cuda.h"
#include "engine/kernels/cpu/pattention_kernels.h"

namespace tfw {

namespace {

EnvChoice reference_chosen("TFW_PATTENTION", "reference");
EnvChoice cuda_composition_chosen("TFW_PATTENTION_CUDA", "composition");
EnvChoice cuda_registers_chosen("TFW_PATTENTION_CUDA", "registers");

pattention_cuda::Kernel cuda_kernel() {
  return cuda_registers_chosen.on() ? pattention_cuda::Kernel::registers : pattention_cuda::Kernel::rows;
}

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <typename T>
inline T gelu(T x) {
  return static_cast<T>(0.5) * x * (static_cast<T>(1) + std::erf(x * static_cast<T>(kInvSqrt2)));
}

template <typename T>
inline T gelu_grad(T x) {  // Φ(x) + x φ(x)
  const T cdf = static_cast<T>(0.5) * (static_cast<T>(1) + std::erf(x * static_cast<T>(kInvSqrt2)));
  return cdf + x * static_cast<T>(kInvSqrt2Pi) * std::exp(static_cast<T>(-0.5) * x * x);
}

}  // namespace

namespace {

// Rows per task: enough work per task to amortise the thread hand-off.
std::int64_t grain(std::int64_t n) { return std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, n)); }

template <typename T>
void forward_rows(const T* s, T* a, double* stat, std::int64_t rows, std::int64_t n, PattentionNorm norm, double m,
                  double eps) {
  if constexpr (std::is_same_v<T, float>) {
    if (pattention_fused_vectorised()) {
      at::parallel_for(0, rows, grain(n), [&](std::int64_t begin, std::int64_t end) {
        pattention_kernels::forward_avx2(s, a, stat, begin, end, n, static_cast<int>(norm), m, eps);
      });
      return;
    }
  }
  at::parallel_for(0, rows, grain(n), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const T* x = s + row * n;
      T* y = a + row * n;
      switch (norm) {
        case PattentionNorm::l2_gelu: {
          double sum = 0;
          for (std::int64_t j = 0; j < n; ++j) sum += static_cast<double>(x[j]) * x[j];
          const double r = 1.0 / std::sqrt(sum + eps);
          stat[row] = r;
          const T scale = static_cast<T>(m * r);
          for (std::int64_t j = 0; j < n; ++j) y[j] = gelu<T>(x[j] * scale);
          break;
        }
        case PattentionNorm::gelu_l2: {
          double sum = 0;
          for (std::int64_t j = 0; j < n; ++j) {
            y[j] = gelu<T>(x[j]);
            sum += static_cast<double>(y[j]) * y[j];
          }
          const double r = 1.0 / std::sqrt(sum + eps);
          stat[row] = r;
          const T scale = static_cast<T>(m * r);
          for (std::int64_t j = 0; j < n; ++j) y[j] *= scale;
          break;
        }
        case PattentionNorm::gelu_l1: {
          double sum = 0;
          for (std::int64_t j = 0; j < n; ++j) {
            y[j] = gelu<T>(x[j]);
            sum += std::abs(static_cast<double>(y[j]));
          }
          const double z = sum + eps;
          stat[row] = z;
          const T scale = static_cast<T>(m / z);
          for (std::int64_t j = 0; j < n; ++j) y[j] *= scale;
          break;
        }
        case PattentionNorm::softmax: {
          T high = x[0];
          for (std::int64_t j = 1; j < n; ++j) high = std::max(high, x[j]);
          double sum = 0;
          for (std::int64_t j = 0; j < n; ++j) {
            y[j] = std::exp(x[j] - high);
            sum += y[j];
          }
          const T scale = static_cast<T>(m / sum);
          for (std::int64_t j = 0; j < n; ++j) y[j] *= scale;
          break;
        }
      }
    }
  });
}

// `saved` is s for the GELU variants and a for softmax.
template <typename T>
void backward_rows(const T* saved, const double* stat, const T* da, T* ds, std::int64_t rows, std::int64_t n,
                   PattentionNorm norm, double m) {
  if constexpr (std::is_same_v<T, float>) {
    if (pattention_fused_vectorised()) {
      at::parallel_for(0, rows, grain(n), [&](std::int64_t begin, std::int64_t end) {
        pattention_kernels::backward_avx2(saved, stat, da, ds, begin, end, n, static_cast<int>(norm), m);
      });
      return;
    }
  }
  at::parallel_for(0, rows, grain(n), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const T* x = saved + row * n;
      const T* g_out = da + row * n;
      T* g_in = ds + row * n;
      switch (norm) {
        case PattentionNorm::l2_gelu: {
          const double r = stat[row];
          const T scale = static_cast<T>(m * r);
          double c = 0;  // Σ du·s, with du kept in ds for the second loop
          for (std::int64_t j = 0; j < n; ++j) {
            g_in[j] = g_out[j] * gelu_grad<T>(x[j] * scale);
            c += static_cast<double>(g_in[j]) * x[j];
          }
          const T k = static_cast<T>(m * r * r * r * c);
          for (std::int64_t j = 0; j < n; ++j) g_in[j] = scale * g_in[j] - k * x[j];
          break;
        }
        case PattentionNorm::gelu_l2:
        case PattentionNorm::gelu_l1: {
          double c = 0;  // Σ da·g
          for (std::int64_t j = 0; j < n; ++j) c += static_cast<double>(g_out[j]) * gelu<T>(x[j]);
          const bool l2 = norm == PattentionNorm::gelu_l2;
          const double s_ = stat[row];
          const T direct = static_cast<T>(l2 ? m * s_ : m / s_);
          const T k = static_cast<T>(l2 ? m * s_ * s_ * s_ * c : m * c / (s_ * s_));
          for (std::int64_t j = 0; j < n; ++j) {
            const T g = gelu<T>(x[j]);
            const T through = l2 ? g : static_cast<T>((g > 0) - (g < 0));
            g_in[j] = gelu_grad<T>(x[j]) * (direct * g_out[j] - k * through);
          }
          break;
        }
        case PattentionNorm::softmax: {
          double c = 0;  // Σ da·a
          for (std::int64_t j = 0; j < n; ++j) c += static_cast<double>(g_out[j]) * x[j];
          const T k = static_cast<T>(c / m);
          for (std::int64_t j = 0; j < n; ++j) g_in[j] = x[j] * (g_out[j] - k);
          break;
        }
      }
    }
  });
}

pattention_cuda::Type cuda_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return pattention_cuda::Type::f32;
    case torch::kFloat64: return pattention_cuda::Type::f64;
    case torch::kBFloat16: return pattention_cuda::Type::bf16;
    default: throw Error("the fused Pattention on CUDA takes float32, float64 or bf16 scores");
  }
}

class FusedNormalise : public torch::autograd::Function<FusedNormalise> {
 public:
  // `multiplier`: a float64 scalar tensor, on the scores' device for CUDA (read there by the
  // kernels) and on the CPU for the CPU (read once here).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& scores, std::int64_t norm,
                               const torch::Tensor& multiplier, double eps) {
    RECORD_USER_SCOPE("tfw::pattention_norm");  // for the profiler (engine/train/profile.h)
    const torch::Tensor s = scores.contiguous();
    const std::int64_t n = s.size(-1), rows = n == 0 ? 0 : s.numel() / n;
    torch::Tensor a = torch::empty_like(s);
    torch::Tensor stat = torch::empty({rows}, s.options().dtype(torch::kFloat64));
    const auto which = static_cast<PattentionNorm>(norm);
    ctx->saved_data["norm"] = norm;
    ctx->saved_data["multiplier"] = multiplier;
    ctx->save_for_backward({which == PattentionNorm::softmax ? a : s, stat});
    if (s.is_cuda()) {
      pattention_cuda::forward(cuda_type(s), s.data_ptr(), a.data_ptr(), stat.data_ptr<double>(),
                               multiplier.data_ptr<double>(), rows, n, static_cast<int>(which), eps,
                               cuda_current_stream(s), cuda_kernel());
      return a;
    }
    const double m = multiplier.item<double>();
    if (s.scalar_type() == torch::kBFloat16) {  // only when pattention_fused_vectorised()
      const auto* in = reinterpret_cast<const std::uint16_t*>(s.data_ptr<at::BFloat16>());
      auto* out = reinterpret_cast<std::uint16_t*>(a.data_ptr<at::BFloat16>());
      double* stats = stat.data_ptr<double>();
      at::parallel_for(0, rows, grain(n), [&](std::int64_t begin, std::int64_t end) {
        pattention_kernels::forward_bf16_avx2(in, out, stats, begin, end, n, static_cast<int>(which), m, eps);
      });
    } else {
      AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "pattention_fused_forward", [&] {
        forward_rows<scalar_t>(s.data_ptr<scalar_t>(), a.data_ptr<scalar_t>(), stat.data_ptr<double>(), rows, n, which,
                               m, eps);
      });
    }
    return a;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_USER_SCOPE("tfw::pattention_norm");
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& kept = saved[0];
    const torch::Tensor& stat = saved[1];
    const torch::Tensor da = grads[0].contiguous();
    const std::int64_t n = kept.size(-1), rows = n == 0 ? 0 : kept.numel() / n;
    torch::Tensor ds = torch::empty_like(kept);
    const auto which = static_cast<PattentionNorm>(ctx->saved_data["norm"].toInt());
    const torch::Tensor multiplier_tensor = ctx->saved_data["multiplier"].toTensor();
    if (kept.is_cuda()) {
      const torch::Tensor grad = da.to(kept.scalar_type());  // a no-op: the gradient of an output of that type
      pattention_cuda::backward(cuda_type(kept), kept.data_ptr(), stat.data_ptr<double>(), grad.data_ptr(),
                                ds.data_ptr(), multiplier_tensor.data_ptr<double>(), rows, n, static_cast<int>(which),
                                cuda_current_stream(kept), cuda_kernel());
      return {ds, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    const double multiplier = multiplier_tensor.item<double>();
    if (kept.scalar_type() == torch::kBFloat16) {
      const torch::Tensor da16 = da.to(torch::kBFloat16);  // a no-op: the gradient of a bf16 output
      const auto* in = reinterpret_cast<const std::uint16_t*>(kept.data_ptr<at::BFloat16>());
      const auto* grad = reinterpret_cast<const std::uint16_t*>(da16.data_ptr<at::BFloat16>());
      auto* out = reinterpret_cast<std::uint16_t*>(ds.data_ptr<at::BFloat16>());
      const double* stats = stat.data_ptr<double>();
      at::parallel_for(0, rows, grain(n), [&](std::int64_t begin, std::int64_t end) {
        pattention_kernels::backward_bf16_avx2(in, stats, grad, out, begin, end, n, static_cast<int>(which),
                                               multiplier);
      });
    } else {
      AT_DISPATCH_FLOATING_TYPES(kept.scalar_type(), "pattention_fused_backward", [&] {
        backward_rows<scalar_t>(kept.data_ptr<scalar_t>(), stat.data_ptr<double>(), da.data_ptr<scalar_t>(),
                                ds.data_ptr<scalar_t>(), rows, n, which, multiplier);
      });
    }
    return {ds, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

PattentionImplementation pattention_implementation() {
  return reference_chosen.on() ? PattentionImplementation::reference : PattentionImplementation::fused;
}

void pattention_set_implementation(PattentionImplementation implementation) {
  reference_chosen.set(implementation == PattentionImplementation::reference);
}

bool pattention_cuda_fused() { return !cuda_composition_chosen.on(); }

void pattention_set_cuda_fused(bool fused) { cuda_composition_chosen.set(!fused); }

bool pattention_cuda_registers() { return cuda_registers_chosen.on(); }

void pattention_set_cuda_registers(bool registers) { cuda_registers_chosen.set(registers); }

torch::Tensor pattention_scores_normalise_fused(const torch::Tensor& s, PattentionNorm norm, double multiplier,
                                                double eps) {
  const auto device = s.is_cuda() ? s.device() : torch::Device(torch::kCPU);
  return pattention_scores_normalise_fused(
      s, norm, torch::scalar_tensor(multiplier, torch::TensorOptions().dtype(torch::kFloat64).device(device)), eps);
}

torch::Tensor pattention_scores_normalise_fused(const torch::Tensor& s, PattentionNorm norm,
                                                const torch::Tensor& multiplier, double eps) {
  const auto type = s.scalar_type();
  if (s.is_cuda() && pattention_cuda::compiled()) {
    // bf16, float32 and float64 rows as they are (bf16 computed in float32); fp16 on a float32
    // copy. The multiplier as a float64 scalar on the scores' GPU.
    const torch::Tensor m = multiplier.to(s.device(), torch::kFloat64).reshape({});
    const torch::Tensor rows = type == torch::kHalf ? s.to(torch::kFloat32) : s;
    if (rows.scalar_type() != torch::kFloat32 && rows.scalar_type() != torch::kFloat64 &&
        rows.scalar_type() != torch::kBFloat16) {
      throw Error("the fused Pattention takes float32, float64, bf16 or fp16 scores");
    }
    return FusedNormalise::apply(rows, static_cast<std::int64_t>(norm), m, eps);
  }
  if (!s.device().is_cpu()) {  // a device without our kernels: Θ is the composition of torch ops
    return pattention_scores_normalise(at_least_float32(s), norm, multiplier.to(s.device(), torch::kFloat64), eps);
  }
  const torch::Tensor m = multiplier.to(torch::kCPU, torch::kFloat64);
  if (type == torch::kBFloat16 || type == torch::kHalf) {
    // bf16 rows are computed in float32 row by row and stay bf16 in memory (the AVX2 kernels);
    // elsewhere, and for fp16, Θ runs on a float32 copy and returns float32.
    if (type == torch::kBFloat16 && pattention_fused_vectorised()) {
      return FusedNormalise::apply(s, static_cast<std::int64_t>(norm), m, eps);
    }
    return FusedNormalise::apply(s.to(torch::kFloat32), static_cast<std::int64_t>(norm), m, eps);
  }
  if (type != torch::kFloat32 && type != torch::kFloat64) {
    throw Error("the fused Pattention takes float32, float64 or bf16 scores");
  }
  return FusedNormalise::apply(s, static_cast<std::int64_t>(norm), m, eps);
}

}  // namespace tfw
