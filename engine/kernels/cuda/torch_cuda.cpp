// See torch_cuda.h. Compiled with TFW_CUDA_KERNELS where LibTorch has CUDA (engine/CMakeLists.txt).
#include "engine/kernels/cuda/torch_cuda.h"

#ifdef TFW_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "engine/core/error.h"

namespace tfw {

void* cuda_current_stream(const torch::Tensor& t) {
#ifdef TFW_CUDA_KERNELS
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  (void)t;
  throw Error("this build of tfw has no CUDA kernels: its LibTorch has no CUDA");
#endif
}

std::int64_t cuda_peak_allocated_bytes(int device) {
#ifdef TFW_CUDA_KERNELS
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
#else
  (void)device;
  return 0;
#endif
}

}  // namespace tfw
