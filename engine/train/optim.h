// The optimiser pieces of the trainer, exposed for tests: AdamW parameter groups (weight
// decay on matrices only), global gradient-norm clipping, and AdamW's update fused into one
// multi-tensor kernel per parameter group.
#pragma once

#include <unordered_map>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/nn/model.h"
#include "engine/config/run_config.h"

namespace tfw {

// Group 0: every parameter with 2+ dims (Pattention keys and values, the embedding, linear
// weights) with train.weight_decay; group 1: the 1-D ones (norm gains and biases, linear
// biases) without decay.
std::vector<torch::optim::OptimizerParamGroup> optimizer_groups(Model& model, const TrainConfig& train);

// Scales all gradients so that their global L2 norm is at most max_norm (0: no clipping) and
// returns the norm before clipping (NaN or inf when a gradient is not finite), as a 0-dim
// tensor on the gradients' device: nothing is read back, so a CUDA step does not wait for it.
// The norms come from one multi-tensor kernel (_foreach_norm), and the clip coefficient stays
// a tensor; the arithmetic is torch::nn::utils::clip_grad_norm_'s (the bound divided by the
// norm + 1e-6, at most 1).
torch::Tensor gradients_clip_on_device(const std::vector<torch::Tensor>& parameters, double max_norm);

// The same, with the norm read back.
double gradients_clip(const std::vector<torch::Tensor>& parameters, double max_norm);

// torch::optim::AdamW's update of every parameter that has a gradient, done by ATen's fused
// kernel (at::_fused_adamw_): one multi-tensor kernel per parameter group instead of about
// ten kernels per parameter, on the CPU and on CUDA. The AdamW keeps the state (exp_avg,
// exp_avg_sq and step, created as its own step() would), so checkpoints, growth's row
// extension and rank 0's broadcast read and write it as before. The step counts live on the
// parameters' device between steps_write_back() calls, so that a skipped update changes
// them there. The arithmetic is AdamW's, in another order: the parameters agree with
// torch::optim::AdamW's to within float rounding (tests/engine/test_optim.cpp: 1e-6 after 200
// steps), not bit for bit.
class FusedAdamW {
 public:
  explicit FusedAdamW(torch::optim::AdamW& optimizer) : optimizer_(&optimizer) {}

  // One update at learning rate lr (every group's). skip, if defined: a 0-dim float32 tensor
  // on the parameters' device; where it is 1 nothing changes, the step counts included (the
  // kernel's found_inf), without a read-back.
  void step(double lr, const torch::Tensor& skip = {});
  // The AdamW state's step counts from the device's, in one copy.
  void steps_write_back();

 private:
  torch::optim::AdamW* optimizer_;
  std::unordered_map<const void*, torch::Tensor> steps_;  // by parameter; float32, on its device
};

}  // namespace tfw
