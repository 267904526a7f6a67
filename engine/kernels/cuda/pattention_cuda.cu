// See pattention_cuda.h for the formulas. One thread block per row (a grid-stride loop over
// rows); each thread walks the row with a stride of the block size, and the row sums are tree
// reductions (warp shuffles, then one value per warp through shared memory).
#include "engine/kernels/cuda/pattention_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "engine/kernels/cuda/elements.cuh"

namespace tfw::pattention_cuda {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// The arithmetic type of a row: float32 for float32 and bf16, float64 for float64.
template <typename T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};

using cuda_kernels::load;
using cuda_kernels::store;

__device__ __forceinline__ float erf_(float x) { return erff(x); }
__device__ __forceinline__ double erf_(double x) { return erf(x); }
__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }

template <typename A>
__device__ __forceinline__ A gelu(A x) {
  return A(0.5) * x * (A(1) + erf_(x * A(kInvSqrt2)));
}

template <typename A>
__device__ __forceinline__ A gelu_grad(A x) {  // Φ(x) + x φ(x)
  return A(0.5) * (A(1) + erf_(x * A(kInvSqrt2))) + x * A(kInvSqrt2Pi) * exp_(A(-0.5) * x * x);
}

// The sum (or max) of v over the block, returned to every thread. `shared` holds 32 values.
template <typename A, bool kMax>
__device__ A block_reduce(A v, A* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const A other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? (other > v ? other : v) : v + other;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // the previous reduction's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : (kMax ? shared[0] : A(0));
    for (int offset = 16; offset > 0; offset >>= 1) {
      const A other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = kMax ? (other > v ? other : v) : v + other;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

template <typename T>
__global__ void forward_kernel(const T* __restrict__ s, T* __restrict__ a, double* __restrict__ stat,
                               const double* __restrict__ multiplier, std::int64_t rows, std::int64_t n, int norm,
                               double eps) {
  using A = typename Acc<T>::type;
  __shared__ A shared[32];
  const double m = *multiplier;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = s + row * n;
    T* y = a + row * n;
    switch (norm) {
      case 0: {  // l2_gelu
        A sum = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          const A v = load(x + j);
          sum += v * v;
        }
        const double r = 1.0 / sqrt(static_cast<double>(block_reduce<A, false>(sum, shared)) + eps);
        if (threadIdx.x == 0) stat[row] = r;
        const A scale = static_cast<A>(m * r);
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) store(y + j, gelu<A>(load(x + j) * scale));
        break;
      }
      case 1:    // gelu_l2
      case 2: {  // gelu_l1
        A sum = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          const A g = gelu<A>(load(x + j));
          sum += norm == 1 ? g * g : (g < A(0) ? -g : g);
        }
        const double total = static_cast<double>(block_reduce<A, false>(sum, shared));
        const double statistic = norm == 1 ? 1.0 / sqrt(total + eps) : total + eps;
        if (threadIdx.x == 0) stat[row] = statistic;
        const A scale = static_cast<A>(norm == 1 ? m * statistic : m / statistic);
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) store(y + j, gelu<A>(load(x + j)) * scale);
        break;
      }
      default: {  // softmax
        A high = load(x);
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) high = max(high, load(x + j));
        high = block_reduce<A, true>(high, shared);
        A sum = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += exp_(load(x + j) - high);
        const A scale = static_cast<A>(m / static_cast<double>(block_reduce<A, false>(sum, shared)));
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) store(y + j, exp_(load(x + j) - high) * scale);
        break;
      }
    }
  }
}

template <typename T>
__global__ void backward_kernel(const T* __restrict__ saved, const double* __restrict__ stat, const T* __restrict__ da,
                                T* __restrict__ ds, const double* __restrict__ multiplier, std::int64_t rows,
                                std::int64_t n, int norm) {
  using A = typename Acc<T>::type;
  __shared__ A shared[32];
  const double m = *multiplier;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = saved + row * n;
    const T* g_out = da + row * n;
    T* g_in = ds + row * n;
    switch (norm) {
      case 0: {  // l2_gelu: du = da·gelu'(m r s), c = Σ du·s
        const double r = stat[row];
        const A scale = static_cast<A>(m * r);
        A c = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          const A v = load(x + j);
          c += load(g_out + j) * gelu_grad<A>(v * scale) * v;
        }
        const A k = static_cast<A>(m * r * r * r * static_cast<double>(block_reduce<A, false>(c, shared)));
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          const A v = load(x + j);
          store(g_in + j, scale * (load(g_out + j) * gelu_grad<A>(v * scale)) - k * v);
        }
        break;
      }
      case 1:    // gelu_l2
      case 2: {  // gelu_l1: c = Σ da·g
        A c = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) c += load(g_out + j) * gelu<A>(load(x + j));
        const double total = static_cast<double>(block_reduce<A, false>(c, shared));
        const double statistic = stat[row];
        const bool l2 = norm == 1;
        const A direct = static_cast<A>(l2 ? m * statistic : m / statistic);
        const A k =
            static_cast<A>(l2 ? m * statistic * statistic * statistic * total : m * total / (statistic * statistic));
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          const A v = load(x + j);
          const A g = gelu<A>(v);
          const A through = l2 ? g : static_cast<A>((g > A(0)) - (g < A(0)));
          store(g_in + j, gelu_grad<A>(v) * (direct * load(g_out + j) - k * through));
        }
        break;
      }
      default: {  // softmax: saved is a; c = Σ da·a
        A c = 0;
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) c += load(g_out + j) * load(x + j);
        const A k = static_cast<A>(static_cast<double>(block_reduce<A, false>(c, shared)) / m);
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
          store(g_in + j, load(x + j) * (load(g_out + j) - k));
        }
        break;
      }
    }
  }
}

// ---- Rows in registers (Kernel::registers) ----
// Each thread keeps its share of a row in registers from the first pass to the last: the
// pairs j = 2(t + k·blockDim), k < kMaxPairs, each read with one 4-byte (bf16) or 8-byte
// (float) load and written the same way, so a row is read once and written once in each
// direction; GELU and its derivative share one erf, each computed once an element. Sums
// accumulate in float32, pairs in the order of a thread's elements, then the tree.
// 8 elements a thread: n up to 8,192 at 1,024 threads. The backward keeps three rows' shares
// (48 floats at 16 elements a thread took 128 registers, which 1,024 threads cannot have: an
// SM holds 65,536); __launch_bounds__ holds the compiler to 64 registers a thread.
constexpr int kMaxPairs = 4;
constexpr int kRegistersMaxThreads = 1024;

__device__ __forceinline__ void load2(const float* p, float& a, float& b) {
  const float2 v = *reinterpret_cast<const float2*>(p);
  a = v.x;
  b = v.y;
}
__device__ __forceinline__ void load2(const __nv_bfloat16* p, float& a, float& b) {
  const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  a = v.x;
  b = v.y;
}
__device__ __forceinline__ void store2(float* p, float a, float b) {
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// Φ(x) and x, from which gelu(x) = x Φ(x) and gelu'(x) = Φ(x) + x φ(x).
__device__ __forceinline__ float gelu_cdf(float x) { return 0.5f * (1.0f + erff(x * static_cast<float>(kInvSqrt2))); }
__device__ __forceinline__ float gelu_density_term(float x) {
  return x * static_cast<float>(kInvSqrt2Pi) * expf(-0.5f * x * x);
}

// Reads this thread's pairs of a row into v (0 past the row's end).
template <typename T>
__device__ __forceinline__ void row_load(const T* __restrict__ x, std::int64_t pairs, float (&v)[2 * kMaxPairs]) {
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) {
    const std::int64_t p = threadIdx.x + static_cast<std::int64_t>(k) * blockDim.x;
    if (p < pairs) {
      load2(x + 2 * p, v[2 * k], v[2 * k + 1]);
    } else {
      v[2 * k] = 0.0f;
      v[2 * k + 1] = 0.0f;
    }
  }
}

template <typename T>
__device__ __forceinline__ void row_store(T* __restrict__ y, std::int64_t pairs, const float (&v)[2 * kMaxPairs]) {
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k) {
    const std::int64_t p = threadIdx.x + static_cast<std::int64_t>(k) * blockDim.x;
    if (p < pairs) store2(y + 2 * p, v[2 * k], v[2 * k + 1]);
  }
}

template <typename T>
__global__ void __launch_bounds__(kRegistersMaxThreads)
    forward_registers_kernel(const T* __restrict__ s, T* __restrict__ a, double* __restrict__ stat,
                             const double* __restrict__ multiplier, std::int64_t rows, std::int64_t n, int norm,
                             double eps) {
  __shared__ float shared[32];
  const double m = *multiplier;
  const std::int64_t pairs = n / 2;
  constexpr int kCount = 2 * kMaxPairs;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float v[kCount];
    row_load(s + row * n, pairs, v);
    switch (norm) {
      case 0: {  // l2_gelu
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kCount; ++i) sum += v[i] * v[i];
        const double r = 1.0 / sqrt(static_cast<double>(block_reduce<float, false>(sum, shared)) + eps);
        if (threadIdx.x == 0) stat[row] = r;
        const float scale = static_cast<float>(m * r);
#pragma unroll
        for (int i = 0; i < kCount; ++i) v[i] = gelu<float>(v[i] * scale);
        break;
      }
      case 1:    // gelu_l2
      case 2: {  // gelu_l1
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
          v[i] = v[i] * gelu_cdf(v[i]);  // gelu(0) = 0: the padding adds nothing
          sum += norm == 1 ? v[i] * v[i] : fabsf(v[i]);
        }
        const double total = static_cast<double>(block_reduce<float, false>(sum, shared));
        const double statistic = norm == 1 ? 1.0 / sqrt(total + eps) : total + eps;
        if (threadIdx.x == 0) stat[row] = statistic;
        const float scale = static_cast<float>(norm == 1 ? m * statistic : m / statistic);
#pragma unroll
        for (int i = 0; i < kCount; ++i) v[i] *= scale;
        break;
      }
      default: {  // softmax
        float high = -INFINITY;
#pragma unroll
        for (int k = 0; k < kMaxPairs; ++k) {
          if (threadIdx.x + static_cast<std::int64_t>(k) * blockDim.x < pairs)
            high = fmaxf(high, fmaxf(v[2 * k], v[2 * k + 1]));
        }
        high = block_reduce<float, true>(high, shared);
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < kMaxPairs; ++k) {
          const bool inside = threadIdx.x + static_cast<std::int64_t>(k) * blockDim.x < pairs;
          v[2 * k] = inside ? expf(v[2 * k] - high) : 0.0f;
          v[2 * k + 1] = inside ? expf(v[2 * k + 1] - high) : 0.0f;
          sum += v[2 * k] + v[2 * k + 1];
        }
        const float scale = static_cast<float>(m / static_cast<double>(block_reduce<float, false>(sum, shared)));
#pragma unroll
        for (int i = 0; i < kCount; ++i) v[i] *= scale;
        break;
      }
    }
    row_store(a + row * n, pairs, v);
  }
}

template <typename T>
__global__ void __launch_bounds__(kRegistersMaxThreads)
    backward_registers_kernel(const T* __restrict__ saved, const double* __restrict__ stat, const T* __restrict__ da,
                              T* __restrict__ ds, const double* __restrict__ multiplier, std::int64_t rows,
                              std::int64_t n, int norm) {
  __shared__ float shared[32];
  const double m = *multiplier;
  const std::int64_t pairs = n / 2;
  constexpr int kCount = 2 * kMaxPairs;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float v[kCount], g[kCount];  // the saved row (s, or a for softmax) and da
    row_load(saved + row * n, pairs, v);
    row_load(da + row * n, pairs, g);
    switch (norm) {
      case 0: {  // l2_gelu: du = da·gelu'(m r s), c = Σ du·s, ds = m r du − m r³ c s
        const double r = stat[row];
        const float scale = static_cast<float>(m * r);
        float c = 0.0f;
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
          const float x = v[i] * scale;
          g[i] *= gelu_cdf(x) + gelu_density_term(x);  // du
          c += g[i] * v[i];
        }
        const float k = static_cast<float>(m * r * r * r * static_cast<double>(block_reduce<float, false>(c, shared)));
#pragma unroll
        for (int i = 0; i < kCount; ++i) g[i] = scale * g[i] - k * v[i];
        break;
      }
      case 1:    // gelu_l2
      case 2: {  // gelu_l1: c = Σ da·g, ds = gelu'(s)·(direct da − k through(g))
        float gelu_of[kCount];
        float c = 0.0f;
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
          const float cdf = gelu_cdf(v[i]);
          gelu_of[i] = v[i] * cdf;
          v[i] = cdf + gelu_density_term(v[i]);  // from here on v holds gelu'(s)
          c += g[i] * gelu_of[i];
        }
        const double total = static_cast<double>(block_reduce<float, false>(c, shared));
        const double statistic = stat[row];
        const bool l2 = norm == 1;
        const float direct = static_cast<float>(l2 ? m * statistic : m / statistic);
        const float k = static_cast<float>(l2 ? m * statistic * statistic * statistic * total
                                              : m * total / (statistic * statistic));
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
          const float through = l2 ? gelu_of[i] : static_cast<float>((gelu_of[i] > 0.0f) - (gelu_of[i] < 0.0f));
          g[i] = v[i] * (direct * g[i] - k * through);
        }
        break;
      }
      default: {  // softmax: saved is a; c = Σ da·a, ds = a·(da − c / m)
        float c = 0.0f;
#pragma unroll
        for (int i = 0; i < kCount; ++i) c += g[i] * v[i];
        const float k = static_cast<float>(static_cast<double>(block_reduce<float, false>(c, shared)) / m);
#pragma unroll
        for (int i = 0; i < kCount; ++i) g[i] = v[i] * (g[i] - k);
        break;
      }
    }
    row_store(ds + row * n, pairs, g);
  }
}

// Threads a block: about four elements a thread, from 64 to 512.
int block_threads(std::int64_t n) {
  const std::int64_t warps = (n / 4 + 31) / 32;
  return static_cast<int>(std::clamp<std::int64_t>(warps, 2, 16) * 32);
}

unsigned grid_rows(std::int64_t rows) { return static_cast<unsigned>(std::min<std::int64_t>(rows, 1 << 30)); }

// The registers kernels: a whole number of pairs (n even, so each pair is aligned), float32
// or bf16, and at most kMaxPairs pairs a thread at kRegistersMaxThreads threads. Threads a
// block: kMaxPairs pairs a thread (fewer in the last), in whole warps, from 32 to 1,024.
bool registers_apply(Type type, std::int64_t n) {
  return type != Type::f64 && n % 2 == 0 && n / 2 <= std::int64_t{kRegistersMaxThreads} * kMaxPairs;
}
// Each pair is read and written as one access: every row's start (n even) and so each
// pointer must be aligned to a pair (4 bytes for bf16, 8 for float32). A tensor LibTorch
// allocates is; a contiguous view at an odd offset is not, and takes the rows kernels.
bool pairs_aligned(Type type, std::initializer_list<const void*> pointers) {
  const std::uintptr_t pair = type == Type::bf16 ? 4 : 8;
  for (const void* p : pointers) {
    if (reinterpret_cast<std::uintptr_t>(p) % pair != 0) return false;
  }
  return true;
}
int registers_threads(std::int64_t n) {
  const std::int64_t warps = (n / 2 + kMaxPairs * 32 - 1) / (kMaxPairs * 32);
  return static_cast<int>(std::clamp<std::int64_t>(warps, 1, kRegistersMaxThreads / 32) * 32);
}

}  // namespace

bool compiled() { return true; }

void forward(Type type, const void* s, void* a, double* stat, const double* multiplier, std::int64_t rows,
             std::int64_t n, int norm, double eps, void* stream, Kernel kernel) {
  if (rows == 0 || n == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (kernel == Kernel::registers && registers_apply(type, n) && pairs_aligned(type, {s, a})) {
    const int threads = registers_threads(n);
    if (type == Type::f32) {
      forward_registers_kernel<float><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const float*>(s), static_cast<float*>(a), stat, multiplier, rows, n, norm, eps);
    } else {
      forward_registers_kernel<__nv_bfloat16><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const __nv_bfloat16*>(s), static_cast<__nv_bfloat16*>(a), stat, multiplier, rows, n, norm, eps);
    }
    cuda_kernels::launch_check("Pattention forward (registers)");
    return;
  }
  const int threads = block_threads(n);
  switch (type) {
    case Type::f32:
      forward_kernel<float><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const float*>(s), static_cast<float*>(a), stat, multiplier, rows, n, norm, eps);
      break;
    case Type::f64:
      forward_kernel<double><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const double*>(s), static_cast<double*>(a), stat, multiplier, rows, n, norm, eps);
      break;
    case Type::bf16:
      forward_kernel<__nv_bfloat16><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const __nv_bfloat16*>(s), static_cast<__nv_bfloat16*>(a), stat, multiplier, rows, n, norm, eps);
      break;
  }
  cuda_kernels::launch_check("Pattention forward");
}

void backward(Type type, const void* saved, const double* stat, const void* da, void* ds, const double* multiplier,
              std::int64_t rows, std::int64_t n, int norm, void* stream, Kernel kernel) {
  if (rows == 0 || n == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (kernel == Kernel::registers && registers_apply(type, n) && pairs_aligned(type, {saved, da, ds})) {
    const int threads = registers_threads(n);
    if (type == Type::f32) {
      backward_registers_kernel<float><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const float*>(saved), stat, static_cast<const float*>(da), static_cast<float*>(ds), multiplier,
          rows, n, norm);
    } else {
      backward_registers_kernel<__nv_bfloat16><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const __nv_bfloat16*>(saved), stat, static_cast<const __nv_bfloat16*>(da),
          static_cast<__nv_bfloat16*>(ds), multiplier, rows, n, norm);
    }
    cuda_kernels::launch_check("Pattention backward (registers)");
    return;
  }
  const int threads = block_threads(n);
  switch (type) {
    case Type::f32:
      backward_kernel<float><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const float*>(saved), stat, static_cast<const float*>(da), static_cast<float*>(ds), multiplier,
          rows, n, norm);
      break;
    case Type::f64:
      backward_kernel<double><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const double*>(saved), stat, static_cast<const double*>(da), static_cast<double*>(ds), multiplier,
          rows, n, norm);
      break;
    case Type::bf16:
      backward_kernel<__nv_bfloat16><<<grid_rows(rows), threads, 0, cuda_stream>>>(
          static_cast<const __nv_bfloat16*>(saved), stat, static_cast<const __nv_bfloat16*>(da),
          static_cast<__nv_bfloat16*>(ds), multiplier, rows, n, norm);
      break;
  }
  cuda_kernels::launch_check("Pattention backward");
}

}  // namespace tfw::pattention_cuda
