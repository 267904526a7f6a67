// The fused loss softmax on CUDA where this build's LibTorch has no CUDA: nothing can call it
// (no tensor lives on a GPU), and compiled() says so.
#include "engine/core/error.h"
#include "engine/kernels/cuda/loss_cuda.h"

namespace tfw::loss_cuda {

bool compiled() { return false; }

void softmax_cross_entropy(Type, void*, const std::int64_t*, float*, std::int64_t, std::int64_t, std::int64_t, float,
                           void*) {
  throw Error("this build of tfw has no CUDA kernels: its LibTorch has no CUDA");
}

}  // namespace tfw::loss_cuda
