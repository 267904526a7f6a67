#include "engine/train/lm_loss.h"

#include <limits>

#include "engine/kernels/cuda/torch_cuda.h"
#include "engine/core/env_choice.h"
#include "engine/kernels/cuda/loss_cuda.h"

namespace tfw {

namespace {

EnvChoice loss_fused_chosen("TFW_LOSS_CUDA", "fused");

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The loss's forward pass computes its gradients too (the softmax minus the one-hot, over N,
// times the other factor), block by block; backward() scales them by the incoming gradient.
struct ChunkedCrossEntropy : torch::autograd::Function<ChunkedCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& embedding,
                               const torch::Tensor& targets, std::int64_t valid, std::int64_t chunk_rows, bool bf16) {
    const std::int64_t N = hidden.size(0), V = embedding.size(0);
    const torch::ScalarType product = bf16 ? torch::kBFloat16 : hidden.scalar_type();
    const torch::Tensor h_all = hidden.to(product), e = embedding.to(product);
    torch::Tensor grad_hidden = torch::empty_like(hidden);
    torch::Tensor grad_embedding = torch::zeros_like(embedding);
    torch::Tensor loss = torch::zeros({}, hidden.options().dtype(torch::kFloat64));
    // On CUDA, the softmax and its gradient in one kernel over the product's own memory
    // (engine/kernels/cuda/loss_cuda.h); the per-row losses are summed once, in float64, at the end.
    const bool fused = hidden.is_cuda() && targets.device() == hidden.device() && lm_loss_cuda_fused() &&
                       (product == torch::kBFloat16 || product == torch::kFloat32);
    const torch::Tensor row_loss = fused ? torch::empty({N}, hidden.options().dtype(torch::kFloat32)) : torch::Tensor();
    const torch::Tensor targets_long = fused ? targets.to(torch::kLong).contiguous() : targets;
    for (std::int64_t start = 0; start < N; start += chunk_rows) {
      const std::int64_t n = std::min(chunk_rows, N - start);
      const torch::Tensor h = h_all.narrow(0, start, n);
      torch::Tensor logits = h.matmul(e.t());  // (n, V)
      torch::Tensor dp;
      if (fused) {
        loss_cuda::softmax_cross_entropy(product == torch::kBFloat16 ? loss_cuda::Type::bf16 : loss_cuda::Type::f32,
                                         logits.data_ptr(), targets_long.data_ptr<std::int64_t>() + start,
                                         row_loss.data_ptr<float>() + start, n, V, valid,
                                         static_cast<float>(1.0 / static_cast<double>(N)), cuda_current_stream(logits));
        dp = logits;
      } else {
        const torch::Tensor t = targets.narrow(0, start, n).unsqueeze(1);  // (n, 1)
        if (logits.scalar_type() != torch::kFloat64) logits = logits.to(torch::kFloat32);
        if (valid < V) logits.narrow(1, valid, V - valid).fill_(-std::numeric_limits<double>::infinity());
        const torch::Tensor lse = logits.logsumexp(1, true);  // (n, 1)
        loss += (lse - logits.gather(1, t)).sum().to(torch::kFloat64);
        // d(mean loss)/d logits = (softmax - one-hot) / N, in the logits' own memory.
        torch::Tensor d = logits.sub_(lse).exp_();
        d.scatter_add_(1, t, torch::full({n, 1}, -1.0, d.options()));
        d.div_(static_cast<double>(N));
        dp = d.to(product);
      }
      grad_hidden.narrow(0, start, n).copy_(dp.matmul(e));
      grad_embedding.add_(dp.t().matmul(h).to(grad_embedding.scalar_type()));
    }
    if (fused) loss = row_loss.sum(torch::kFloat64);
    ctx->save_for_backward({grad_hidden, grad_embedding});
    return (loss / static_cast<double>(N)).to(bf16 ? torch::kFloat32 : hidden.scalar_type());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& g = grad_outputs[0];
    return {saved[0] * g.to(saved[0].scalar_type()),
            saved[1] * g.to(saved[1].scalar_type()),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

bool lm_loss_cuda_fused() { return loss_fused_chosen.on(); }
void lm_loss_set_cuda_fused(bool fused) { loss_fused_chosen.set(fused); }

torch::Tensor cross_entropy_chunked(const torch::Tensor& hidden, const torch::Tensor& embedding,
                                    const torch::Tensor& targets, std::int64_t valid, std::int64_t chunk_rows,
                                    Precision precision) {
  return ChunkedCrossEntropy::apply(hidden, embedding, targets, valid, chunk_rows, precision == Precision::bf16);
}

torch::Tensor cross_entropy_plain(const torch::Tensor& logits, const torch::Tensor& targets, std::int64_t valid) {
  const std::int64_t V = logits.size(-1);
  const torch::Tensor used = valid < V ? logits.narrow(-1, 0, valid) : logits;
  return torch::nn::functional::cross_entropy(used.reshape({-1, used.size(-1)}), targets.reshape({-1}));
}

}  // namespace tfw
