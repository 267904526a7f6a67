// What the CUDA runtime says about a GPU, without torch's or CUDA's headers: the
// trainer's memory check asks how much memory the device has free. Compiled from
// cuda_info.cu where this build's LibTorch has CUDA, else from cuda_info_none.cpp.
#pragma once

#include <cstdint>
#include <optional>

namespace tfw {

struct CudaMemory {
  std::int64_t free_bytes = 0, total_bytes = 0;
};

// cudaMemGetInfo of GPU `index`; nothing where this build has no CUDA or the runtime fails.
std::optional<CudaMemory> cuda_memory(int index);

}  // namespace tfw
