#include "engine/machine/cuda_info.h"

#include <cuda_runtime.h>

namespace tfw {

std::optional<CudaMemory> cuda_memory(int index) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return std::nullopt;
  if (cudaSetDevice(index) != cudaSuccess) return std::nullopt;
  std::size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaSetDevice(previous);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it: the next launch must not report this
    return std::nullopt;
  }
  return CudaMemory{static_cast<std::int64_t>(free_bytes), static_cast<std::int64_t>(total_bytes)};
}

}  // namespace tfw
