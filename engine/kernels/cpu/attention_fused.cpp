// See attention_fused.h. Per head, with P = softmax(scale·Q·Kᵀ) (rows over the positions a
// query sees) and O = P·V:
//   forward   S = scale·Q·Kᵀ, P = softmax by row, O = P·V
//   backward  dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)),
//             dQ = scale·dS·K, dK = scale·dSᵀ·Q
// Saved for the backward: q, k, v (the inputs, kept by the layers anyway) and P, one (T, T)
// matrix a head, which the composition keeps too (softmax's output); nothing else. A causal
// head works in blocks of kRowBlock query rows: block [r0, r1) needs keys [0, r1) only, so the
// products skip the columns every row of the block masks (at T = 128 and blocks of 32, 62.5%
// of the full products). Entries of P past a block's last column are never written or read.
// The products are BLAS calls made inside at::parallel_for over heads. The BLAS is the one
// libtorch_cpu exports (MKL with GNU OpenMP in PyTorch's x86 wheels; OpenBLAS with Debian's
// 1.13), and either runs a call made inside a parallel region on the calling thread alone.
// Which BLAS, and why: docs/results/performance.md §6 (build/bench/bench_blas).
#include "engine/kernels/cpu/attention_fused.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "engine/kernels/cpu/pattention_kernels.h"

extern "C" {
// The Fortran BLAS interface (column-major), as libtorch_cpu itself calls it.
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
}

namespace tfw {

namespace {

// Query rows per block of a causal head: small enough to skip most masked columns, large
// enough for BLAS to run near its speed. Measured with bench_attention (2 threads): blocks of
// 32 and 64 were alike; one block (no skipping) took 1.4-1.8x as long at T = 512 and 1024.
constexpr std::int64_t kRowBlock = 32;

// Row-major C (m×n, row stride ldc) = alpha·op(A)·op(B) + beta·C, op(A) m×k, op(B) k×n; a
// transposed operand is stored k×m (A) or n×k (B). BLAS is column-major, and the row-major C
// is the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the same call with the operands swapped.
template <typename T>
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  const char op_b = tb ? 'T' : 'N', op_a = ta ? 'T' : 'N';
  const int mm = static_cast<int>(n), nn = static_cast<int>(m), kk = static_cast<int>(k);
  const int la = static_cast<int>(ldb), lb = static_cast<int>(lda), lc = static_cast<int>(ldc);
  if constexpr (std::is_same_v<T, float>) {
    sgemm_(&op_b, &op_a, &mm, &nn, &kk, &alpha, b, &la, a, &lb, &beta, c, &lc);
  } else {
    dgemm_(&op_b, &op_a, &mm, &nn, &kk, &alpha, b, &la, a, &lb, &beta, c, &lc);
  }
}

// softmax of a row of n scores, in place (row sums in double, as the Pattention kernels).
template <typename T>
void softmax_row(T* row, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (pattention_fused_vectorised()) {
      double unused = 0;
      pattention_kernels::forward_avx2(row, row, &unused, 0, 1, n, /*softmax*/ 3, 1.0, 0.0);
      return;
    }
  }
  const T high = *std::max_element(row, row + n);
  double sum = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - high);
    sum += row[j];
  }
  const T scale = static_cast<T>(1.0 / sum);
  for (std::int64_t j = 0; j < n; ++j) row[j] *= scale;
}

// d = p ⊙ (d − Σ d·p) over a row of n, in place: the softmax backward.
template <typename T>
void softmax_row_backward(const T* p, T* d, std::int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (pattention_fused_vectorised()) {
      const double unused = 0;
      pattention_kernels::backward_avx2(p, &unused, d, d, 0, 1, n, /*softmax*/ 3, 1.0);
      return;
    }
  }
  double c = 0;
  for (std::int64_t j = 0; j < n; ++j) c += static_cast<double>(d[j]) * p[j];
  const T k = static_cast<T>(c);
  for (std::int64_t j = 0; j < n; ++j) d[j] = p[j] * (d[j] - k);
}

// One head's matrix inside a (B, H, T, dh) tensor whose last axis has unit stride.
template <typename T>
struct HeadView {
  T* data;
  std::int64_t s0, s1, ld;
  HeadView(const torch::Tensor& x) : data(x.data_ptr<T>()), s0(x.stride(0)), s1(x.stride(1)), ld(x.stride(2)) {}
  T* at(std::int64_t b, std::int64_t h) const { return data + b * s0 + h * s1; }
};

struct Shape {
  std::int64_t B, H, L, dh;
  bool causal;
  double scale;
  std::int64_t block() const { return causal ? std::min(kRowBlock, L) : L; }
  std::int64_t cols(std::int64_t r1) const { return causal ? r1 : L; }
  std::int64_t seen(std::int64_t row) const { return causal ? row + 1 : L; }
};

template <typename T>
void forward_heads(const Shape& shape, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const torch::Tensor& p, const torch::Tensor& out) {
  const HeadView<T> Q(q), K(k), V(v), O(out);
  T* P = p.data_ptr<T>();
  const std::int64_t L = shape.L, dh = shape.dh;
  const T scale = static_cast<T>(shape.scale);
  at::parallel_for(0, shape.B * shape.H, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bh = begin; bh < end; ++bh) {
      const std::int64_t b = bh / shape.H, h = bh % shape.H;
      const T *q_ = Q.at(b, h), *k_ = K.at(b, h), *v_ = V.at(b, h);
      T* o_ = O.at(b, h);
      T* p_ = P + bh * L * L;
      for (std::int64_t r0 = 0; r0 < L; r0 += shape.block()) {
        const std::int64_t r1 = std::min(L, r0 + shape.block()), rows = r1 - r0, cols = shape.cols(r1);
        gemm<T>(false, true, rows, cols, dh, scale, q_ + r0 * Q.ld, Q.ld, k_, K.ld, 0, p_ + r0 * L, L);
        for (std::int64_t i = r0; i < r1; ++i) {
          T* row = p_ + i * L;
          softmax_row(row, shape.seen(i));
          std::fill(row + shape.seen(i), row + cols, T(0));
        }
        gemm<T>(false, false, rows, dh, cols, 1, p_ + r0 * L, L, v_, V.ld, 0, o_ + r0 * O.ld, O.ld);
      }
    }
  });
}

template <typename T>
void backward_heads(const Shape& shape, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    const torch::Tensor& p, const torch::Tensor& d_out, const torch::Tensor& dq,
                    const torch::Tensor& dk, const torch::Tensor& dv) {
  const HeadView<T> Q(q), K(k), V(v), dO(d_out), dQ(dq), dK(dk), dV(dv);
  const T* P = p.data_ptr<T>();
  const std::int64_t L = shape.L, dh = shape.dh;
  const T scale = static_cast<T>(shape.scale);
  at::parallel_for(0, shape.B * shape.H, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<T> scratch(static_cast<std::size_t>(L * L));  // dP, then dS, of one head
    T* ds = scratch.data();
    for (std::int64_t bh = begin; bh < end; ++bh) {
      const std::int64_t b = bh / shape.H, h = bh % shape.H;
      const T *q_ = Q.at(b, h), *k_ = K.at(b, h), *v_ = V.at(b, h), *do_ = dO.at(b, h);
      T *dq_ = dQ.at(b, h), *dk_ = dK.at(b, h), *dv_ = dV.at(b, h);
      const T* p_ = P + bh * L * L;
      for (std::int64_t t = 0; t < L; ++t) {  // dK and dV accumulate over blocks
        std::fill(dk_ + t * dK.ld, dk_ + t * dK.ld + dh, T(0));
        std::fill(dv_ + t * dV.ld, dv_ + t * dV.ld + dh, T(0));
      }
      for (std::int64_t r0 = 0; r0 < L; r0 += shape.block()) {
        const std::int64_t r1 = std::min(L, r0 + shape.block()), rows = r1 - r0, cols = shape.cols(r1);
        gemm<T>(false, true, rows, cols, dh, 1, do_ + r0 * dO.ld, dO.ld, v_, V.ld, 0, ds + r0 * L, L);
        for (std::int64_t i = r0; i < r1; ++i) {
          T* row = ds + i * L;
          softmax_row_backward(p_ + i * L, row, shape.seen(i));
          std::fill(row + shape.seen(i), row + cols, T(0));
        }
        gemm<T>(true, false, cols, dh, rows, 1, p_ + r0 * L, L, do_ + r0 * dO.ld, dO.ld, 1, dv_, dV.ld);
        gemm<T>(false, false, rows, dh, cols, scale, ds + r0 * L, L, k_, K.ld, 0, dq_ + r0 * dQ.ld, dQ.ld);
        gemm<T>(true, false, cols, dh, rows, scale, ds + r0 * L, L, q_ + r0 * Q.ld, Q.ld, 1, dk_, dK.ld);
      }
    }
  });
}

// A tensor like x with a unit last stride (x's own layout when it is dense, for the gradients).
torch::Tensor empty_with_rows_like(const torch::Tensor& x) {
  torch::Tensor y = torch::empty_like(x);
  return y.stride(-1) == 1 ? y : torch::empty(x.sizes(), x.options());
}

class FusedAttention : public torch::autograd::Function<FusedAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool causal) {
    RECORD_USER_SCOPE("tfw::attention");  // for the profiler (engine/train/profile.h)
    const Shape shape = shape_of(q, causal);
    torch::Tensor out = torch::empty({shape.B, shape.L, shape.H, shape.dh}, q.options());
    torch::Tensor p = torch::empty({shape.B, shape.H, shape.L, shape.L}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attention_fused_forward",
                               [&] { forward_heads<scalar_t>(shape, q, k, v, p, out.transpose(1, 2)); });
    ctx->saved_data["causal"] = causal;
    ctx->save_for_backward({q, k, v, p});
    return out.view({shape.B, shape.L, shape.H * shape.dh});
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    RECORD_USER_SCOPE("tfw::attention");
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &p = saved[3];
    const Shape shape = shape_of(q, ctx->saved_data["causal"].toBool());
    const torch::Tensor d_out = grads[0].contiguous().view({shape.B, shape.L, shape.H, shape.dh}).transpose(1, 2);
    torch::Tensor dq = empty_with_rows_like(q), dk = empty_with_rows_like(k), dv = empty_with_rows_like(v);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attention_fused_backward",
                               [&] { backward_heads<scalar_t>(shape, q, k, v, p, d_out, dq, dk, dv); });
    return {dq, dk, dv, torch::Tensor()};
  }

 private:
  static Shape shape_of(const torch::Tensor& q, bool causal) {
    Shape shape{q.size(0), q.size(1), q.size(2), q.size(3), causal, 0};
    shape.scale = 1.0 / std::sqrt(static_cast<double>(shape.dh));
    return shape;
  }
};

}  // namespace

bool attention_fused_cpu_applies(const torch::Tensor& q) {
  const auto type = q.scalar_type();
  return q.device().is_cpu() && q.dim() == 4 &&
         (type == torch::kFloat32 || type == torch::kFloat64 || type == torch::kBFloat16);
}

torch::Tensor attention_fused_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) {
  // The kernel reads rows through their strides; only the last axis must be dense. bf16
  // inputs (under autocast q and k may come float32 from the rotation, v bf16) are widened
  // to float32, and the output is bf16 when v is, as the product P·v is under autocast
  // (autograd narrows the gradients back).
  const bool wide =
      q.scalar_type() == torch::kFloat64 && k.scalar_type() == torch::kFloat64 && v.scalar_type() == torch::kFloat64;
  const auto type = wide ? torch::kFloat64 : torch::kFloat32;
  auto ready = [&](const torch::Tensor& x) {
    torch::Tensor y = x.scalar_type() == type ? x : x.to(type);
    return y.stride(-1) == 1 ? y : y.contiguous();
  };
  torch::Tensor out = FusedAttention::apply(ready(q), ready(k), ready(v), causal);
  return v.scalar_type() == torch::kBFloat16 ? out.to(torch::kBFloat16) : out;
}

}  // namespace tfw
