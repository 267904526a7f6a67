// The language-model loss's softmax on CUDA, fused: for each row of a block of logits (rows ×
// V, the output matmul's product, float32 or bf16) and its target t, in one kernel,
//   m = max_{j<valid} x_j,  lse = m + log Σ_{j<valid} exp(x_j − m),  loss_row = lse − x_t,
// and, written over the logits in place, the gradient of the mean loss:
//   d_j = (exp(x_j − lse) − [j = t]) · scale   for j < valid,   d_j = 0   for j ≥ valid
// (scale = 1/N, N the rows of the whole batch). The arithmetic is float32 as in the
// composition it replaces (engine/train/lm_loss.cpp: the logits cast to float32, logsumexp,
// gather, sub_, exp_, scatter_add_, div_, the cast back), which reads and writes a float32
// copy of the block about ten times; this reads the row twice and writes it once, in its own
// type. A target outside [0, valid) gives that row a NaN loss. One thread block per row; the
// row's maximum and sum come from one pass (each thread keeps a running maximum and rescales
// its sum when it rises), then two block reductions. No torch header here or in the .cu.
#pragma once

#include <cstdint>

namespace tfw::loss_cuda {

enum class Type { f32 = 0, bf16 = 1 };  // of the logits

// Whether this build compiled the kernel (its LibTorch has CUDA).
bool compiled();

// logits: rows × V, contiguous, on the device (overwritten by d); targets: rows int64;
// row_loss: rows floats. stream: a cudaStream_t. Throws tfw::Error with the CUDA error's text
// when the launch fails.
void softmax_cross_entropy(Type type, void* logits, const std::int64_t* targets, float* row_loss, std::int64_t rows,
                           std::int64_t vocab, std::int64_t valid, float scale, void* stream);

}  // namespace tfw::loss_cuda
