#include "engine/train/optim.h"

#include <limits>

namespace tfw {

std::vector<torch::optim::OptimizerParamGroup> optimizer_groups(Model& model, const TrainConfig& train) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(train.lr)
                                                            .betas({train.beta1, train.beta2})
                                                            .eps(train.eps)
                                                            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(train.weight_decay));
  if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));
  return groups;
}

torch::Tensor gradients_clip_on_device(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({}, torch::kFloat64);
  std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
  torch::Tensor total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  // No clipping (grad_clip = 0): an infinite bound, which leaves every gradient as it is. The
  // largest double was converted to a float and overflowed (exit 1).
  const double bound = max_norm > 0 ? max_norm : std::numeric_limits<double>::infinity();
  torch::Tensor coefficient = torch::clamp(bound / (total + 1e-6), std::nullopt, 1.0);
  at::_foreach_mul_(grads, coefficient);
  return total;
}

double gradients_clip(const std::vector<torch::Tensor>& parameters, double max_norm) {
  return gradients_clip_on_device(parameters, max_norm).item<double>();
}

void FusedAdamW::step(double lr, const torch::Tensor& skip) {
  torch::NoGradGuard no_grad;
  auto& state = optimizer_->state();
  for (auto& group : optimizer_->param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
    for (const torch::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;  // as AdamW::step: no gradient, no update
      const void* key = p.unsafeGetTensorImpl();
      auto found = state.find(p.unsafeGetTensorImpl());
      if (found == state.end()) {  // AdamW's own first step, as it creates it
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        if (options.amsgrad()) fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        found = state.emplace(p.unsafeGetTensorImpl(), std::move(fresh)).first;
      }
      auto& s = static_cast<torch::optim::AdamWParamState&>(*found->second);
      auto step = steps_.find(key);
      if (step == steps_.end()) {
        step = steps_
                   .emplace(key, torch::full({}, static_cast<double>(s.step()),
                                             torch::TensorOptions(torch::kFloat32).device(p.device())))
                   .first;
      }
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      if (options.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
      steps.push_back(step->second);
    }
    if (params.empty()) continue;
    // As PyTorch's _fused_adamw: the counts first (the kernel reads them), then taken back
    // where the update was skipped.
    at::_foreach_add_(steps, 1);
    const auto [beta1, beta2] = options.betas();
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2,
                      options.weight_decay(), options.eps(), options.amsgrad(), /*maximize=*/false,
                      /*grad_scale=*/std::nullopt, skip.defined() ? std::optional<torch::Tensor>(skip) : std::nullopt);
    if (skip.defined()) at::_foreach_add_(steps, skip, -1);
  }
}

void FusedAdamW::steps_write_back() {
  if (steps_.empty()) return;
  auto& state = optimizer_->state();
  std::vector<const void*> keys;
  std::vector<torch::Tensor> counts;
  for (const auto& [key, count] : steps_) {
    keys.push_back(key);
    counts.push_back(count);
  }
  const torch::Tensor all = torch::stack(counts).to(torch::kCPU, torch::kFloat64);  // the one copy
  const auto* values = all.data_ptr<double>();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    auto found = state.find(const_cast<void*>(keys[i]));
    if (found != state.end()) {
      static_cast<torch::optim::AdamWParamState&>(*found->second).step(static_cast<std::int64_t>(values[i]));
    }
  }
}

}  // namespace tfw
