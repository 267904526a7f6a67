#pragma once
// The parts of LibTorch the engine uses, instead of torch/torch.h (issue 48). GCC instantiates,
// in every file, the templates that the inline functions of each header it reads call, whether
// or not the file calls them: torch/torch.h's whole C++ API (every nn module, the data loaders,
// the JIT's serialisation) cost an empty file 8.7 s, even through a precompiled header; these
// headers cost it 4.9 s. A file that needs more of LibTorch includes that header itself.
#include <torch/autograd.h>                         // custom autograd functions, the profiler's guards
#include <torch/cuda.h>                             // torch::cuda::is_available, synchronize
#include <torch/nn/functional/loss.h>               // F::cross_entropy
#include <torch/nn/module.h>                        // torch::nn::Module
#include <torch/nn/modules/container/modulelist.h>  // torch::nn::ModuleList
#include <torch/nn/modules/linear.h>                // torch::nn::Linear
#include <torch/nn/modules/normalization.h>         // torch::nn::LayerNorm
#include <torch/nn/utils/clip_grad.h>               // torch::nn::utils::clip_grad_norm_
#include <torch/optim/adamw.h>                      // torch::optim::AdamW
#include <torch/types.h>                            // at::Tensor, the factory functions, torch::indexing
#include <torch/utils.h>                            // torch::NoGradGuard, torch::manual_seed
