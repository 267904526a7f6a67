#include "engine/train/window_loss.h"

#include "engine/machine/device.h"
#include "engine/dist/dist_group.h"

namespace tfw {

torch::Tensor loss_of(Model& model, const torch::Tensor& batch, std::int64_t T, std::int64_t V, Precision precision,
                      torch::nn::functional::CrossEntropyFuncOptions::reduction_t reduction) {
  const torch::Device device = module_device(model);
  const torch::Tensor tokens = to_device(batch, device);
  torch::Tensor logits;  // (B, T, V)
  {
    const AutocastGuard autocast(precision, device);
    logits = model.forward(tokens.narrow(1, 0, T));
  }
  if (logits.size(-1) > V) logits = logits.narrow(-1, 0, V);  // a padded vocabulary's ids: no probability
  return torch::nn::functional::cross_entropy(at_least_float32(logits).reshape({-1, V}),
                                              tokens.narrow(1, 1, T).reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(reduction));
}

torch::Tensor validation_batch(const TokenShard& val, std::int64_t B, std::int64_t T, std::int64_t batches,
                               std::int64_t k) {
  const std::int64_t windows = B * batches;
  const std::uint64_t span = val.size() - static_cast<std::uint64_t>(T) - 1;
  torch::Tensor batch = torch::empty({B, T + 1}, torch::kInt64);
  auto rows = batch.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t w = k * B + b;
    const std::uint64_t start = windows > 1 ? span * static_cast<std::uint64_t>(w) / (windows - 1) : 0;
    for (std::int64_t t = 0; t <= T; ++t) rows[b][t] = val[start + t];
  }
  return batch;
}

double evaluate(Model& model, const TokenShard& val, std::int64_t B, std::int64_t T, std::int64_t V,
                std::int64_t batches, Precision precision, DistGroup* dist) {
  torch::NoGradGuard no_grad;
  const std::int64_t rank = dist != nullptr ? dist->rank() : 0, world = dist != nullptr ? dist->world() : 1;
  double total = 0;
  for (std::int64_t k = rank; k < batches; k += world) {
    total += loss_of(model, validation_batch(val, B, T, batches, k), T, V, precision).item<double>();
  }
  if (dist != nullptr) {
    std::vector<torch::Tensor> sum{torch::tensor({total}, torch::kFloat64)};
    dist->allreduce_sum(sum, "the evaluation's all-reduce");
    total = sum[0].item<double>();
  }
  return total / static_cast<double>(batches);
}

}  // namespace tfw
