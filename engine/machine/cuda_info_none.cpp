// engine/machine/cuda_info.h where this build's LibTorch has no CUDA.
#include "engine/machine/cuda_info.h"

namespace tfw {

std::optional<CudaMemory> cuda_memory(int) { return std::nullopt; }

}  // namespace tfw
