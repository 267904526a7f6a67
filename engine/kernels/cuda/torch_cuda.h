// What tfw asks of LibTorch's CUDA side, in one file compiled with c10's CUDA headers: the
// stream LibTorch queues work on (tfw's own kernels, engine/kernels/cuda/*.cu, take it as a
// cudaStream_t so that no torch header reaches nvcc), and the caching allocator's peak.
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace tfw {

// The current CUDA stream of t's device, as a cudaStream_t. A build whose LibTorch has no
// CUDA throws tfw::Error (nothing can call it there: no tensor lives on a GPU).
void* cuda_current_stream(const torch::Tensor& t);

// The most memory LibTorch's caching allocator has held for tensors on GPU `device` at once
// since the process began (its "allocated bytes" peak; what the allocator reserved beyond
// that, and CUDA's own context, not counted). 0 where this build has no CUDA.
std::int64_t cuda_peak_allocated_bytes(int device);

}  // namespace tfw
