// The fused Pattention normalisation on CUDA: the same Θ(S) and the same formulas
// as the CPU kernels (engine/nn/pattention_fused.cpp, whose autograd function calls these), one
// thread block per row of scores, written in engine/kernels/cuda/pattention_cuda.cu and compiled by nvcc in
// every build whose LibTorch has CUDA. No torch header here or in the .cu: the autograd
// function passes raw pointers and the current stream.
//
// Per row s of n scores, with multiplier m (tau or n0, read from device memory so that no
// step waits for the GPU) and g = gelu(s), the exact (erf) GELU:
//   l2_gelu  r = (Σ s² + eps)^-½        a = gelu(m r s)
//            ds = m r du − m r³ s Σ(du·s),           du = da·gelu'(m r s)
//   gelu_l2  r = (Σ g² + eps)^-½        a = m r g
//            ds = gelu'(s)·(m r da − m r³ g Σ(da·g))
//   gelu_l1  z = Σ|g| + eps             a = m g / z
//            ds = gelu'(s)·(m da / z − m sign(g) Σ(da·g) / z²)
//   softmax  p = softmax(s)             a = m p
//            ds = a·(da − Σ(da·a) / m)
// The forward reads a row twice (the reduction, then the output; softmax three times) and
// writes it once; the backward reads `saved` (s, or a for softmax) and da twice and writes ds
// once. Rows stay in L2 between the passes. Sums accumulate in float32 for float32 and bf16
// rows (a tree reduction over the block) and in float64 for float64 rows; the row statistic
// (r or z) is kept in float64 as on the CPU.
#pragma once

#include <cstdint>

namespace tfw::pattention_cuda {

enum class Type { f32 = 0, f64 = 1, bf16 = 2 };  // of s, a, da and ds alike

// Which kernels: `rows`, a row read in two or three passes (above; proven on an H100 and an
// H200), or `registers`, each thread's share of a row kept in registers between the passes,
// read and written in pairs (one bf16x2 or float2 access), GELU and its derivative each
// computed once: a row read once and written once in each direction. `registers` serves
// float32 and bf16 rows of an even n up to 8,192, each row aligned to a pair, and falls back
// to `rows` elsewhere; it is chosen with TFW_PATTENTION_CUDA=registers until a GPU run has
// held it to float64 and measured it (tests/gpu, bench/bench_pattention).
enum class Kernel { rows = 0, registers = 1 };

// Whether this build compiled the kernels (its LibTorch has CUDA).
bool compiled();

// s, a: rows × n, contiguous, on the device; stat: rows doubles (unused for softmax);
// multiplier: one double on the device. stream: a cudaStream_t. Throws tfw::Error with the
// CUDA error's text when a launch fails.
void forward(Type type, const void* s, void* a, double* stat, const double* multiplier, std::int64_t rows,
             std::int64_t n, int norm, double eps, void* stream, Kernel kernel = Kernel::rows);

// saved: s for the GELU variants, a for softmax; da and ds like s.
void backward(Type type, const void* saved, const double* stat, const void* da, void* ds, const double* multiplier,
              std::int64_t rows, std::int64_t n, int norm, void* stream, Kernel kernel = Kernel::rows);

}  // namespace tfw::pattention_cuda
