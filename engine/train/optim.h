// The optimiser pieces of the trainer, exposed for tests: AdamW parameter groups (weight
// decay on matrices only) and global gradient-norm clipping.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "engine/model.h"
#include "engine/run_config.h"

namespace tfw {

// Group 0: every parameter with 2+ dims (Pattention keys and values, the embedding, linear
// weights) with train.weight_decay; group 1: the 1-D ones (norm gains and biases, linear
// biases) without decay.
std::vector<torch::optim::OptimizerParamGroup> optimizer_groups(Model& model, const TrainConfig& train);

// Scales all gradients so that their global L2 norm is at most max_norm (0: no clipping)
// and returns the norm before clipping (NaN or inf when a gradient is not finite).
double gradients_clip(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace tfw
