// Causal attention and partial rotary embedding. See attention.h.
#include "engine/nn/attention.h"

#include <cmath>

#include <torch/version.h>

#include "engine/kernels/cpu/attention_fused.h"
#include "engine/kernels/cuda/torch_cuda.h"
#include "engine/machine/device.h"
#include "engine/core/env_choice.h"
#include "engine/core/error.h"
#include "engine/kernels/cuda/rotary_cuda.h"

namespace tfw {

namespace {
EnvChoice manual_chosen("TFW_ATTENTION", "manual");  // makes `automatic` the reference
EnvChoice rotary_fused_chosen("TFW_ROTARY_CUDA", "fused");

rotary_cuda::Type rotary_type(const torch::Tensor& x) {
  return x.scalar_type() == torch::kBFloat16 ? rotary_cuda::Type::bf16 : rotary_cuda::Type::f32;
}

// The rotary embedding on CUDA in one kernel each way (engine/kernels/cuda/rotary_cuda.h): x (B, T, H, dh)
// contiguous, the table's float32 cos and sin (T, dims).
class FusedRotary : public torch::autograd::Function<FusedRotary> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin, std::int64_t dims) {
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["dims"] = dims;
    return rotate(x, cos, sin, dims, false);
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {rotate(grads[0].contiguous(), saved[0], saved[1], ctx->saved_data["dims"].toInt(), true), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }

 private:
  static torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                              std::int64_t dims, bool inverse) {
    torch::Tensor y = torch::empty_like(x);
    rotary_cuda::rotate(rotary_type(x), x.data_ptr(), y.data_ptr(), cos.data_ptr<float>(), sin.data_ptr<float>(),
                        x.size(0), x.size(1), x.size(2), x.size(3), dims, inverse, cuda_current_stream(x));
    return y;
  }
};

// Whether the heads of x (B, T, H·dh) on this table take the fused kernel.
bool rotary_fused_for(const torch::Tensor& x, const RotaryTable& table) {
  return table.dims > 0 && x.is_cuda() && rotary_cuda_fused() && rotary_cuda::compiled() &&
         (x.scalar_type() == torch::kFloat32 || x.scalar_type() == torch::kBFloat16) &&
         table.cos.scalar_type() == torch::kFloat32 && table.cos.is_contiguous() && table.sin.is_contiguous();
}

torch::Tensor manual_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal) {
  const std::int64_t T = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  // Under bf16 autocast the product is bf16; the softmax runs in float32.
  torch::Tensor scores = at_least_float32(torch::matmul(q, k.transpose(-2, -1))) * scale;  // (B, H, T, T)
  if (causal) {
    torch::Tensor future =
        torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);  // (T, T)
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  return torch::matmul(torch::softmax(scores, -1), v);  // (B, H, T, dh)
}

// (B, H, T, dh) -> (B, T, H·dh) by the kernel.
torch::Tensor attention_merged(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                               AttentionKernel kernel) {
  if (kernel == AttentionKernel::automatic) kernel = attention_kernel_for(q);
  if (kernel == AttentionKernel::cpu) {
    if (!attention_fused_cpu_applies(q) || !attention_fused_cpu_applies(k) || !attention_fused_cpu_applies(v)) {
      throw Error("the fused CPU attention takes CPU tensors of float32, float64 or bf16");
    }
    return attention_fused_cpu(q, k, v, causal);
  }
  torch::Tensor a;  // (B, H, T, dh)
#if TORCH_VERSION_MAJOR >= 2
  if (kernel == AttentionKernel::fused) {
    a = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/causal);
  }
#else
  if (kernel == AttentionKernel::fused) {
    throw Error("fused attention needs LibTorch >= 2; this build has " TORCH_VERSION);
  }
#endif
  if (!a.defined()) a = manual_attention(q, k, v, causal);
  return a.transpose(1, 2).reshape({q.size(0), q.size(2), q.size(1) * q.size(3)});
}
}  // namespace

void attention_set_manual(bool manual) { manual_chosen.set(manual); }

AttentionKernel attention_kernel_for(const torch::Tensor& q) {
  if (!manual_chosen.on() && attention_fused_cpu_applies(q)) return AttentionKernel::cpu;
#if TORCH_VERSION_MAJOR >= 2
  return AttentionKernel::fused;
#else
  return AttentionKernel::manual;
#endif
}

bool rotary_cuda_fused() { return rotary_fused_chosen.on(); }
void rotary_set_cuda_fused(bool fused) { rotary_fused_chosen.set(fused); }

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               AttentionKernel kernel) {
  const torch::Tensor a = attention_merged(q, k, v, /*causal=*/true, kernel);  // (B, T, H·dh)
  return a.view({q.size(0), q.size(2), q.size(1), q.size(3)}).transpose(1, 2);
}

std::int64_t rotary_dims(std::int64_t head_dim, double pct) {
  auto dims = static_cast<std::int64_t>(std::floor(static_cast<double>(head_dim) * pct));
  return dims - dims % 2;
}

RotaryTable rotary_table(std::int64_t T, std::int64_t dims, double base, const torch::TensorOptions& options,
                         std::int64_t start) {
  RotaryTable table;
  table.dims = dims;
  if (dims <= 0) return table;
  // Angles in float64, then cast: positions up to 64k keep full precision.
  auto float64 = torch::TensorOptions().dtype(torch::kFloat64).device(options.device());
  torch::Tensor inv_freq = torch::pow(base, -torch::arange(0, dims, 2, float64) / dims);    // (dims/2)
  torch::Tensor angles = torch::outer(torch::arange(start, start + T, float64), inv_freq);  // (T, dims/2)
  table.cos = torch::cat({angles.cos(), angles.cos()}, -1).to(options.dtype());             // (T, dims)
  table.sin = torch::cat({angles.sin(), angles.sin()}, -1).to(options.dtype());             // (T, dims)
  return table;
}

torch::Tensor rotary_apply(const torch::Tensor& x, const RotaryTable& table) {
  if (table.dims <= 0) return x;
  const std::int64_t half = table.dims / 2;
  torch::Tensor rot = x.narrow(-1, 0, table.dims);                         // (B, H, T, dims)
  torch::Tensor pass = x.narrow(-1, table.dims, x.size(-1) - table.dims);  // (B, H, T, dh - dims)
  torch::Tensor rotated_half =
      torch::cat({-rot.narrow(-1, half, half), rot.narrow(-1, 0, half)}, -1);  // (B, H, T, dims)
  return torch::cat({rot * table.cos + rotated_half * table.sin, pass}, -1);
}

torch::Tensor rotary_heads(const torch::Tensor& x, std::int64_t heads, const RotaryTable& table) {
  const std::int64_t B = x.size(0), T = x.size(1), dh = x.size(2) / heads;
  if (!rotary_fused_for(x, table)) return rotary_apply(x.view({B, T, heads, dh}).transpose(1, 2), table);
  return FusedRotary::apply(x.contiguous().view({B, T, heads, dh}), table.cos, table.sin, table.dims).transpose(1, 2);
}

torch::Tensor multi_head_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                          std::int64_t heads, const RotaryTable& table, AttentionKernel kernel) {
  const std::int64_t B = q.size(0), T = q.size(1), width = q.size(2);
  const std::int64_t dh = width / heads;
  auto split = [&](const torch::Tensor& x) { return x.view({B, T, heads, dh}).transpose(1, 2); };
  torch::Tensor qh = rotary_heads(q, heads, table);                                                // (B, H, T, dh)
  torch::Tensor kh = rotary_heads(k, heads, table);                                                // (B, H, T, dh)
  if (table.cache == nullptr) return attention_merged(qh, kh, split(v), /*causal=*/true, kernel);  // (B, T, H·dh)
  // Incremental: the cache holds L earlier positions of this layer; query i (position L + i)
  // sees keys 0..L+i.
  KVCache& cache = *table.cache;
  const std::size_t layer = cache.layer++;
  if (cache.keys.size() <= layer) {
    cache.keys.push_back(kh);
    cache.values.push_back(split(v));
  } else {
    cache.keys[layer] = torch::cat({cache.keys[layer], kh}, 2);  // (B, H, L + T, dh)
    cache.values[layer] = torch::cat({cache.values[layer], split(v)}, 2);
  }
  const torch::Tensor& keys = cache.keys[layer];
  const std::int64_t L = keys.size(2) - T;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  torch::Tensor scores = at_least_float32(torch::matmul(qh, keys.transpose(-2, -1))) * scale;  // (B, H, T, L + T)
  if (T > 1) {
    torch::Tensor future =
        torch::ones({T, L + T}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(L + 1);
    scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  torch::Tensor a = torch::matmul(torch::softmax(scores, -1).to(cache.values[layer].scalar_type()),
                                  cache.values[layer]);  // (B, H, T, dh)
  return a.transpose(1, 2).reshape({B, T, width});       // (B, T, H·dh)
}

}  // namespace tfw

namespace tfw {

torch::Tensor multi_head_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   std::int64_t heads, AttentionKernel kernel) {
  const std::int64_t B = q.size(0), T = q.size(1), width = q.size(2);
  const std::int64_t dh = width / heads;
  auto split = [&](const torch::Tensor& x) { return x.view({B, T, heads, dh}).transpose(1, 2); };  // (B, H, T, dh)
  return attention_merged(split(q), split(k), split(v), /*causal=*/false, kernel);                 // (B, T, H·dh)
}

}  // namespace tfw
