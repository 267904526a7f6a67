// The stream LibTorch queues work on for a tensor's GPU, for tfw's own CUDA kernels
// (engine/*_cuda.cu), which take it as a cudaStream_t so that no torch header reaches nvcc.
#pragma once

#include <torch/types.h>

namespace tfw {

// The current CUDA stream of t's device, as a cudaStream_t. A build whose LibTorch has no
// CUDA throws tfw::Error (nothing can call it there: no tensor lives on a GPU).
void* cuda_current_stream(const torch::Tensor& t);

}  // namespace tfw
