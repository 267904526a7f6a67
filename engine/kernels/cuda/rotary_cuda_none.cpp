// The fused rotary embedding on CUDA where this build's LibTorch has no CUDA: nothing can call
// it (no tensor lives on a GPU), and compiled() says so.
#include "engine/core/error.h"
#include "engine/kernels/cuda/rotary_cuda.h"

namespace tfw::rotary_cuda {

bool compiled() { return false; }

void rotate(Type, const void*, void*, const float*, const float*, std::int64_t, std::int64_t, std::int64_t,
            std::int64_t, std::int64_t, bool, void*) {
  throw Error("this build of tfw has no CUDA kernels: its LibTorch has no CUDA");
}

}  // namespace tfw::rotary_cuda
