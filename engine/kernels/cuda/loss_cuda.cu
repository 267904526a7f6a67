// See loss_cuda.h for the formulas. One thread block of 1024 threads per row (a grid-stride
// loop over rows); each thread walks the row with a stride of the block size.
#include "engine/kernels/cuda/loss_cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/kernels/cuda/elements.cuh"

namespace tfw::loss_cuda {

namespace {

constexpr int kThreads = 1024;

using cuda_kernels::load;
using cuda_kernels::store;

// The maximum of v over the block, and the sum of s · exp(v − that maximum), to every thread.
// `shared` holds 2 × 32 floats. A thread that saw no element has v = −∞ and s = 0.
__device__ void block_max_sum(float& v, float& s, float* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset), os = __shfl_xor_sync(0xffffffffu, s, offset);
    const float high = fmaxf(v, ov);
    s = (s == 0.f ? 0.f : s * expf(v - high)) + (os == 0.f ? 0.f : os * expf(ov - high));
    v = high;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();  // the previous row's readers are done with `shared`
  if (lane == 0) shared[warp] = v, shared[32 + warp] = s;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : -INFINITY;
    s = lane < warps ? shared[32 + lane] : 0.f;
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, offset), os = __shfl_xor_sync(0xffffffffu, s, offset);
      const float high = fmaxf(v, ov);
      s = (s == 0.f ? 0.f : s * expf(v - high)) + (os == 0.f ? 0.f : os * expf(ov - high));
      v = high;
    }
    if (lane == 0) shared[0] = v, shared[32] = s;
  }
  __syncthreads();
  v = shared[0];
  s = shared[32];
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_cross_entropy_kernel(T* __restrict__ logits, const std::int64_t* __restrict__ targets,
                                 float* __restrict__ row_loss, std::int64_t rows, std::int64_t vocab,
                                 std::int64_t valid, float scale) {
  __shared__ float shared[64];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    T* x = logits + row * vocab;
    // One pass: a running maximum, and the sum of exp(x − that maximum), rescaled as it rises.
    float high = -INFINITY, sum = 0.f;
    for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
      const float v = load(x + j);
      if (v > high) {
        sum = (sum == 0.f ? 0.f : sum * expf(high - v)) + 1.f;
        high = v;
      } else if (high != -INFINITY) {  // (else v and high are both −∞: nothing to add)
        sum += expf(v - high);
      }
    }
    block_max_sum(high, sum, shared);
    const float lse = high + logf(sum);
    const std::int64_t t = targets[row];
    const bool in_range = t >= 0 && t < valid;
    // Every thread reads x_t before any thread overwrites it.
    const float target_logit = in_range ? load(x + t) : 0.f;
    __syncthreads();
    if (threadIdx.x == 0) row_loss[row] = in_range ? lse - target_logit : NAN;
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float d = j < valid ? (expf(load(x + j) - lse) - (j == t ? 1.f : 0.f)) * scale : 0.f;
      store(x + j, d);
    }
  }
}

}  // namespace

bool compiled() { return true; }

void softmax_cross_entropy(Type type, void* logits, const std::int64_t* targets, float* row_loss, std::int64_t rows,
                           std::int64_t vocab, std::int64_t valid, float scale, void* stream) {
  if (rows == 0 || vocab == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const auto grid = static_cast<unsigned>(std::min<std::int64_t>(rows, 1 << 30));
  if (type == Type::f32) {
    softmax_cross_entropy_kernel<float>
        <<<grid, kThreads, 0, cuda_stream>>>(static_cast<float*>(logits), targets, row_loss, rows, vocab, valid, scale);
  } else {
    softmax_cross_entropy_kernel<__nv_bfloat16><<<grid, kThreads, 0, cuda_stream>>>(
        static_cast<__nv_bfloat16*>(logits), targets, row_loss, rows, vocab, valid, scale);
  }
  cuda_kernels::launch_check("loss softmax");
}

}  // namespace tfw::loss_cuda
