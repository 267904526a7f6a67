// What every .cu of this room shares (nvcc only: device code): reading an element as its
// arithmetic type (float for float and bf16, double for double) and writing one back with
// round-to-nearest-even, and the check after a launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "engine/core/error.h"

namespace tfw::cuda_kernels {

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ double load(const double* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Throws tfw::Error("the fused WHAT on CUDA failed: <CUDA's reason>") when the last launch failed.
inline void launch_check(const std::string& what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) throw Error("the fused " + what + " on CUDA failed: " + cudaGetErrorString(error));
}

}  // namespace tfw::cuda_kernels
