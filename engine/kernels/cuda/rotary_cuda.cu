// See rotary_cuda.h for the formulas. One thread per element of y, a grid-stride loop.
#include "engine/kernels/cuda/rotary_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "engine/kernels/cuda/elements.cuh"

namespace tfw::rotary_cuda {

namespace {

using cuda_kernels::load;
using cuda_kernels::store;

template <typename T>
__global__ void rotate_kernel(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ cos,
                              const float* __restrict__ sin, std::int64_t total, std::int64_t positions,
                              std::int64_t heads, std::int64_t head_dim, std::int64_t dims, float sign) {
  const std::int64_t half = dims / 2;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t k = i % head_dim;
    if (k >= dims) {
      y[i] = x[i];
      continue;
    }
    const std::int64_t t = (i / (head_dim * heads)) % positions;
    const std::int64_t j = k < half ? k : k - half;
    const float c = cos[t * dims + j], s = sign * sin[t * dims + j];
    // y_k = x_k·c + r_k·s with r the rotated half: −x_{k+h} below h, x_{k−h} from h on.
    const float r = k < half ? -load(x + i + half) : load(x + i - half);
    store(y + i, __fadd_rn(__fmul_rn(load(x + i), c), __fmul_rn(r, s)));
  }
}

}  // namespace

bool compiled() { return true; }

void rotate(Type type, const void* x, void* y, const float* cos, const float* sin, std::int64_t batch,
            std::int64_t positions, std::int64_t heads, std::int64_t head_dim, std::int64_t dims, bool inverse,
            void* stream) {
  const std::int64_t total = batch * positions * heads * head_dim;
  if (total == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((total + threads - 1) / threads, 1 << 20));
  const float sign = inverse ? -1.f : 1.f;
  if (type == Type::f32) {
    rotate_kernel<float><<<blocks, threads, 0, cuda_stream>>>(static_cast<const float*>(x), static_cast<float*>(y), cos,
                                                              sin, total, positions, heads, head_dim, dims, sign);
  } else {
    rotate_kernel<__nv_bfloat16><<<blocks, threads, 0, cuda_stream>>>(static_cast<const __nv_bfloat16*>(x),
                                                                      static_cast<__nv_bfloat16*>(y), cos, sin, total,
                                                                      positions, heads, head_dim, dims, sign);
  }
  cuda_kernels::launch_check("rotary embedding");
}

}  // namespace tfw::rotary_cuda
