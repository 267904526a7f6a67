#include "engine/train/optim.h"

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

double gradients_clip(const std::vector<torch::Tensor>& parameters, double max_norm) {
  // No clipping (grad_clip = 0): an infinite bound, which leaves every gradient as it is. The
  // largest double was converted to a float and overflowed (exit 1, issue 50).
  return torch::nn::utils::clip_grad_norm_(parameters, max_norm > 0 ? max_norm : std::numeric_limits<double>::infinity());
}

}  // namespace tfw
