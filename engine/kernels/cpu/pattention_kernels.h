// The row kernels of the fused Pattention normalisation for float32, without torch
// headers: pattention_fused.cpp chooses them at run time and calls them on blocks of rows.
// `norm` is the value of PattentionNorm (0 l2_gelu, 1 gelu_l2, 2 gelu_l1, 3 softmax).
#pragma once

#include <cstdint>

namespace tfw {

// Whether float32 rows go through the AVX2 kernels (pattention_kernels_avx2.cpp): when the CPU
// has AVX2 and FMA, unless TFW_PATTENTION_SCALAR=1 (tests compare the two). Pattention's fused
// normalisation and the fused CPU attention both ask.
bool pattention_fused_vectorised();

}  // namespace tfw

namespace tfw::pattention_kernels {

// True when this CPU runs the AVX2+FMA kernels (pattention_kernels_avx2.cpp). Asked in
// cpu_kernels.cpp, compiled without -mavx2.
bool avx2_available();

// Forward over rows [begin, end): a = Θ(s) per row of n scores; stat[row] gets the row
// statistic the backward needs (r for the L2 variants, z for gelu_l1, unused for softmax).
void forward_avx2(const float* s, float* a, double* stat, std::int64_t begin, std::int64_t end, std::int64_t n,
                  int norm, double multiplier, double eps);

// Backward over rows [begin, end): ds from da, with `saved` = s (GELU variants) or a (softmax).
void backward_avx2(const float* saved, const double* stat, const float* da, float* ds, std::int64_t begin,
                   std::int64_t end, std::int64_t n, int norm, double multiplier);

// The same on bf16 rows (raw bf16 bits), computed in float32: each row is widened into a
// per-thread float buffer, run through the float kernel and rounded back to bf16 (to nearest,
// ties to even), so that no full-size float copy of the scores is ever made.
void forward_bf16_avx2(const std::uint16_t* s, std::uint16_t* a, double* stat, std::int64_t begin, std::int64_t end,
                       std::int64_t n, int norm, double multiplier, double eps);
void backward_bf16_avx2(const std::uint16_t* saved, const double* stat, const std::uint16_t* da, std::uint16_t* ds,
                        std::int64_t begin, std::int64_t end, std::int64_t n, int norm, double multiplier);

}  // namespace tfw::pattention_kernels
