// See pattention_cuda.h for the formulas. One thread block per row (a grid-stride loop over
// rows); each thread walks the row with a stride of the block size, and the row sums are tree
// reductions (warp shuffles, then one value per warp through shared memory).
#include "engine/kernels/cuda/pattention_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
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

// Threads a block: about four elements a thread, from 64 to 512.
int block_threads(std::int64_t n) {
  const std::int64_t warps = (n / 4 + 31) / 32;
  return static_cast<int>(std::clamp<std::int64_t>(warps, 2, 16) * 32);
}

unsigned grid_rows(std::int64_t rows) { return static_cast<unsigned>(std::min<std::int64_t>(rows, 1 << 30)); }

}  // namespace

bool compiled() { return true; }

void forward(Type type, const void* s, void* a, double* stat, const double* multiplier, std::int64_t rows,
             std::int64_t n, int norm, double eps, void* stream) {
  if (rows == 0 || n == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
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
              std::int64_t rows, std::int64_t n, int norm, void* stream) {
  if (rows == 0 || n == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
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
