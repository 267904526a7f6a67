// Causal self-attention pieces shared by both model families: partial rotary position
// embedding (GPT-NeoX "rotate half" on the first rotary_pct of each head's dims) and
// causal softmax attention. Shapes: B batch, H heads, T length, dh head width.
#pragma once

#include <vector>

#include "engine/nn/libtorch.h"

namespace tfw {

enum class AttentionKernel {
  automatic,  // cpu on CPU tensors (unless TFW_ATTENTION=manual); elsewhere fused on
              // LibTorch >= 2, else manual
  manual,     // q·kᵀ/sqrt(dh), causal mask, softmax, ·v: works on every LibTorch (the reference)
  fused,      // at::scaled_dot_product_attention (LibTorch >= 2 only; throws otherwise)
  cpu,        // tfw's fused CPU operator (attention_fused.h); throws on another device
};

// The kernel `automatic` stands for on tensors like q.
AttentionKernel attention_kernel_for(const torch::Tensor& q);

// Makes `automatic` the composition (manual) or not, for every thread, as TFW_ATTENTION=manual
// does at start-up (for benchmarks that compare both in one process).
void attention_set_manual(bool manual);

// q, k, v (B, H, T, dh) -> (B, H, T, dh), scale 1/sqrt(dh), token t sees tokens <= t.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               AttentionKernel kernel = AttentionKernel::automatic);

// Rotary dims of a head: floor(head_dim * pct) rounded down to even.
std::int64_t rotary_dims(std::int64_t head_dim, double pct);

// Keys and values of the positions already seen, per layer, for generating a token at a time
// (`tfw sample`): with a cache, each layer's attention appends its new keys (rotated) and
// values and attends to all cached ones, so a step costs the same at any length.
struct KVCache {
  std::vector<torch::Tensor> keys, values;  // per layer (B, H, L, dh)
  std::int64_t length = 0;                  // positions cached before the current forward
  std::size_t layer = 0;                    // the layer the current forward is at
};

// cos/sin tables for positions start..start+T-1, computed once per forward and shared by
// layers; `cache`, when set, makes the blocks' attention incremental (decoder.h).
struct RotaryTable {
  std::int64_t dims = 0;  // rotary dims per head (even)
  torch::Tensor cos;      // (T, dims)
  torch::Tensor sin;      // (T, dims)
  KVCache* cache = nullptr;
};
RotaryTable rotary_table(std::int64_t T, std::int64_t dims, double base, const torch::TensorOptions& options,
                         std::int64_t start = 0);

// Rotates the first table.dims dims of x (B, H, T, dh), pairing dim j with j + dims/2;
// the other dims pass through. (The composition; rotary_heads rotates CUDA heads with the
// fused kernel of engine/kernels/cuda/rotary_cuda.h instead while rotary_cuda_fused().)
torch::Tensor rotary_apply(const torch::Tensor& x, const RotaryTable& table);

// The heads of x (B, T, H·dh) as (B, H, T, dh), rotated: on CUDA by the fused kernel while
// rotary_cuda_fused(), else by rotary_apply.
torch::Tensor rotary_heads(const torch::Tensor& x, std::int64_t heads, const RotaryTable& table);

// Whether the attention rotates heads on CUDA with the fused kernel (engine/kernels/cuda/rotary_cuda.h):
// only with TFW_ROTARY_CUDA=fused until a GPU run has proven it (tests/gpu holds both
// directions to the composition, the forward bit for bit in float32).
bool rotary_cuda_fused();
void rotary_set_cuda_fused(bool fused);

// The attention step of a decoder block for projections q, k, v (B, T, H·dh): split
// heads, rotate q and k, causal attention, merge heads back to (B, T, H·dh).
torch::Tensor multi_head_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          std::int64_t heads, const RotaryTable& table,
                                          AttentionKernel kernel = AttentionKernel::automatic);

}  // namespace tfw

namespace tfw {

// Bidirectional multi-head attention (an image's tokens all see each other; no position
// rotation: image models add learned position embeddings): q, k, v (B, T, H·dh) -> (B, T,
// H·dh), softmax(q·kᵀ / sqrt(dh))·v per head.
torch::Tensor multi_head_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   std::int64_t heads, AttentionKernel kernel = AttentionKernel::automatic);

}  // namespace tfw
