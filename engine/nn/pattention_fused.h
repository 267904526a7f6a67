// The fused Pattention normalisation: Θ(S) for every score norm as one custom
// autograd function whose forward and backward each make one pass per row of scores,
// parallel over rows. The composition in pattention.cpp (pattention_scores_normalise) stays
// the reference; pattention_implementation() chooses which one layers use.
#pragma once

#include <torch/types.h>

#include "engine/nn/pattention_norm.h"

namespace tfw {

enum class PattentionImplementation { fused, reference };

// Which one Pattention layers use (all threads): fused unless TFW_PATTENTION=reference.
PattentionImplementation pattention_implementation();
void pattention_set_implementation(PattentionImplementation implementation);

// Whether Pattention layers on CUDA use the fused kernels (engine/kernels/cuda/pattention_cuda.cu) rather
// than the composition: yes unless TFW_PATTENTION_CUDA=composition, since they were proven on
// an H100 (equal to the composition in tests/gpu; faster in bench_pattention --device cuda:
// docs/results/performance.md). Also needs pattention_implementation() to be fused
// (TFW_PATTENTION=reference makes every device compose).
bool pattention_cuda_fused();
void pattention_set_cuda_fused(bool fused);

// Whether the fused CUDA kernels keep each thread's share of a row in registers between the
// passes (pattention_cuda::Kernel::registers: bf16 pairs read and written as one access, GELU
// and its derivative once) rather than reading the row again: only with
// TFW_PATTENTION_CUDA=registers until a GPU run has held them to float64 (tests/gpu) and
// measured them (bench_pattention --device cuda, its "reg" column).
bool pattention_cuda_registers();
void pattention_set_cuda_registers(bool registers);

// Θ(s) like pattention_scores_normalise, fused. s (..., n) float32, float64 or bf16 (computed
// in float32; on the CPU returned bf16 on the AVX2 kernels and float32 elsewhere, on CUDA
// returned bf16). `multiplier` is tau (L2 variants) or the token count (L1 variants) and takes
// no gradient. On CUDA the fused kernels run when this build has them (on a GPU without them,
// the composition); the multiplier is best given as a tensor on the device there, which no
// step has to wait for.
torch::Tensor pattention_scores_normalise_fused(const torch::Tensor& s, PattentionNorm norm, double multiplier,
                                                double eps);
torch::Tensor pattention_scores_normalise_fused(const torch::Tensor& s, PattentionNorm norm,
                                                const torch::Tensor& multiplier, double eps);

}  // namespace tfw
