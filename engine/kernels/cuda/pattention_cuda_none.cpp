// The fused Pattention normalisation on CUDA where this build's LibTorch has no CUDA: nothing
// can call it (no tensor lives on a GPU), and compiled() says so.
#include "engine/core/error.h"
#include "engine/kernels/cuda/pattention_cuda.h"

namespace tfw::pattention_cuda {

bool compiled() { return false; }

void forward(Type, const void*, void*, double*, const double*, std::int64_t, std::int64_t, int, double, void*, Kernel) {
  throw Error("this build of tfw has no CUDA kernels: its LibTorch has no CUDA");
}

void backward(Type, const void*, const double*, const void*, void*, const double*, std::int64_t, std::int64_t, int,
              void*, Kernel) {
  throw Error("this build of tfw has no CUDA kernels: its LibTorch has no CUDA");
}

}  // namespace tfw::pattention_cuda
