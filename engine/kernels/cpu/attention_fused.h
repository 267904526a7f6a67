// Softmax attention as one custom autograd operator on the CPU. torch's own path
// for the (B, H, T, dh) products is a serial loop over the B·H heads, each a small matrix
// product that the BLAS splits over every thread, followed by separate passes for the scale,
// the causal mask and the softmax, forward and backward. Here the heads run in parallel, one
// thread each, with single-threaded BLAS products and the softmax applied row by row while the
// row is in cache; a causal head computes only the row blocks' columns up to the block's last
// position (see attention_fused.cpp for what is saved and the block size).
// The composition in attention.cpp (AttentionKernel::manual) stays the reference.
#pragma once

#include <torch/types.h>

namespace tfw {

// Whether attention_fused_cpu takes this input: a CPU tensor (B, H, T, dh) of float32, float64
// or bf16 (bf16 is computed in float32; the output is bf16 when v is).
bool attention_fused_cpu_applies(const torch::Tensor& q);

// q, k, v (B, H, T, dh) -> (B, T, H·dh), softmax(q·kᵀ/sqrt(dh))·v per head; with `causal`,
// position t sees positions <= t. Differentiable in q, k and v.
torch::Tensor attention_fused_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal);

}  // namespace tfw
