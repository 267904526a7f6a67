// The fused Pattention normalisation (issue 16): Θ(S) for every score norm as one custom
// autograd function whose forward and backward each make one pass per row of scores,
// parallel over rows. The composition in pattention.cpp (pattention_scores_normalise) stays
// the reference; pattention_implementation() chooses which one layers use.
#pragma once

#include <torch/torch.h>

#include "engine/pattention.h"

namespace tfw {

enum class PattentionImplementation { fused, reference };

// Which one Pattention layers use (all threads): fused unless TFW_PATTENTION=reference.
PattentionImplementation pattention_implementation();
void pattention_set_implementation(PattentionImplementation implementation);

// Whether float32 rows go through the AVX2 kernels (engine/pattention_kernels_avx2.cpp): when
// the CPU has AVX2 and FMA, unless TFW_PATTENTION_SCALAR=1.
bool pattention_fused_vectorised();

// Θ(s) like pattention_scores_normalise, fused. s (..., n) float32, float64 or bf16 (computed
// in float32, returned bf16 on the AVX2 kernels, float32 elsewhere); on a device other than
// the CPU, the composition. `multiplier` is tau (L2 variants) or the token count (L1
// variants) and takes no gradient.
torch::Tensor pattention_scores_normalise_fused(const torch::Tensor& s, PattentionNorm norm, double multiplier,
                                                double eps);

}  // namespace tfw
