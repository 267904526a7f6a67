// The score norms of Pattention (docs/design/TOKENFORMER.md §1) and the composition that applies
// them: what the layer (pattention.h) and its fused normalisation (pattention_fused.h) share.
// Only tensor types, not LibTorch's modules: the fused file is compiled with OpenMP, outside
// the engine's precompiled header, and pays for every header it parses.
#pragma once

#include <string>

#include <torch/types.h>

namespace tfw {

enum class PattentionNorm { l2_gelu, gelu_l2, gelu_l1, softmax };
enum class TauMode { fixed, sqrt_n };

PattentionNorm pattention_norm_parse(const std::string& name);  // throws UsageError
std::string pattention_norm_name(PattentionNorm norm);
TauMode tau_mode_parse(const std::string& name);
std::string tau_mode_name(TauMode mode);

// Θ applied to scores s (..., n) with multiplier tau (L2 variants) or scale (L1 variants).
// Exposed for tests and for the parameter-attention maps.
torch::Tensor pattention_scores_normalise(const torch::Tensor& s, PattentionNorm norm, const torch::Tensor& multiplier,
                                          double eps);

}  // namespace tfw
