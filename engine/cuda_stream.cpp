// See cuda_stream.h. Compiled with TFW_CUDA_KERNELS where LibTorch has CUDA (engine/CMakeLists.txt).
#include "engine/cuda_stream.h"

#ifdef TFW_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>
#endif

#include "engine/error.h"

namespace tfw {

void* cuda_current_stream(const torch::Tensor& t) {
#ifdef TFW_CUDA_KERNELS
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#else
  (void)t;
  throw Error("this build of tfw has no CUDA kernels: its LibTorch has no CUDA");
#endif
}

}  // namespace tfw
