// Where and in what precision the engine computes: train.device and
// train.precision. The code is the same for every device: models are built on the CPU and
// moved, each batch follows the model, and every tensor the engine creates takes its device
// from a tensor it already has. Only device_resolve() knows about CUDA. Nothing on CUDA has
// run on the machines this project has (no GPU); docs/cli.md says what was run.
#pragma once

#include <optional>
#include <string>

#include <torch/types.h>

#include "engine/config/device_name.h"  // DeviceProblem
#include "engine/config/precision.h"    // Precision, precision_parse, precision_name

namespace torch::nn {
class Module;  // torch/nn/module.h: this header is also read outside the precompiled one
}  // namespace torch::nn

namespace tfw {

// Whether this LibTorch has CUDA and finds a GPU.
bool cuda_available();

// What is wrong with train.device = `name` on this LibTorch and machine: not "cpu", "cuda"
// or "cuda:N" (device_name_problem); CUDA on a LibTorch without it (the message names the LibTorch); a device N
// that does not exist. The config parser reports it at the key, before it keeps the text as a
// DeviceName (engine/config/device_name.h); device_resolve() throws it.
std::optional<DeviceProblem> device_problem(const std::string& name);

// `name` as a device of this LibTorch; throws UsageError with device_problem()'s words.
// A config's device: device_resolve(config.train.device.text()).
torch::Device device_resolve(const std::string& name);

// A batch from host memory onto `device`: on CUDA through pinned memory with a non-blocking
// copy (the step does not wait for it; LibTorch's pinned allocator keeps the host block until
// the copy is done); on the CPU the tensor itself.
torch::Tensor to_device(const torch::Tensor& host, torch::Device device);

// Whether float32 matrix products on CUDA may use TF32 (cuBLAS and cuDNN; train.tf32). A
// process-wide setting of LibTorch: the trainer sets it from the config before its first step.
void cuda_set_tf32(bool allowed);

// The device of a module's first parameter (the CPU for a module without parameters).
torch::Device module_device(const torch::nn::Module& module);

// bf16 autocast over a forward pass: matmuls (linear, matmul, mm, bmm, addmm) run in bf16
// from the fp32 master weights; everything else keeps its dtype. The casts of the weights
// are cached for the pass and dropped when the outermost guard ends. A no-op for fp32.
class AutocastGuard {
 public:
  AutocastGuard(Precision precision, torch::Device device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// A tensor in at least float32: bf16 and fp16 become float32, float32 and float64 stay.
torch::Tensor at_least_float32(const torch::Tensor& x);

}  // namespace tfw
