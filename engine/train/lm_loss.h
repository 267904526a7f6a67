// A language model's training loss without the full logits: the cross-entropy of the tied
// output layer (logits = hidden · Eᵀ) computed a block of rows at a time, with its gradients
// computed in the same pass (so the backward pass only scales them). For the GPT-2
// vocabulary at batch 16 × 1024, the fp32 logits alone are 3.3 GB, and as much again for
// their gradient; in blocks of kChunkRows rows they are at most about 400 MB. A vocabulary
// larger than the tokenizer's (padded to a multiple of 64 for the matmul's sake) gives the
// padded ids no probability, here and in the plain loss.
#pragma once

#include <cstdint>

#include "engine/nn/libtorch.h"

#include "engine/config/loss_chunks.h"  // loss_chunked, kChunkRows
#include "engine/config/precision.h"

namespace tfw {

// The mean cross-entropy of logits = hidden · embeddingᵀ over the rows of hidden (N, d)
// against targets (N) int64 in [0, valid), with the columns at and past `valid` left out
// (valid = embedding.size(0): none). The full (N, V) logits are never held: rows go
// chunk_rows at a time. bf16: the products in bf16 (as autocast does them), the softmax in
// fp32. Differentiable in hidden and embedding; equals the plain loss to float rounding
// (tests/engine/test_lm_loss.cpp).
torch::Tensor cross_entropy_chunked(const torch::Tensor& hidden, const torch::Tensor& embedding,
                                    const torch::Tensor& targets, std::int64_t valid, std::int64_t chunk_rows,
                                    Precision precision);

// Whether the chunked loss on CUDA computes its softmax and gradient in one kernel
// (engine/kernels/cuda/loss_cuda.h) rather than the composition of ATen operations: only with
// TFW_LOSS_CUDA=fused until a GPU run has proven the kernel (tests/gpu holds it to float64
// and to the composition; docs/results/performance.md §10). Both keep the softmax in float32.
bool lm_loss_cuda_fused();
void lm_loss_set_cuda_fused(bool fused);

// The plain loss: the mean cross-entropy of logits (..., V) against targets (...), over the
// first `valid` columns only.
torch::Tensor cross_entropy_plain(const torch::Tensor& logits, const torch::Tensor& targets, std::int64_t valid);

}  // namespace tfw
