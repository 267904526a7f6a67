#include "engine/machine/device.h"

#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/machine/runtime.h"

namespace tfw {

bool cuda_available() { return cuda_load().loaded && torch::cuda::is_available(); }

torch::Tensor to_device(const torch::Tensor& host, torch::Device device) {
  if (!device.is_cuda() || !host.device().is_cpu()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

void cuda_set_tf32(bool allowed) {
  at::globalContext().setAllowTF32CuBLAS(allowed);
  at::globalContext().setAllowTF32CuDNN(allowed);
}

std::optional<DeviceProblem> device_problem(const std::string& name) {
  const std::optional<DeviceName> parsed = device_name_parse(name);
  if (!parsed) return device_name_problem(name);
  if (!parsed->is_cuda()) return std::nullopt;
  if (!torch_has_cuda()) {
    return DeviceProblem{
        fmt::format("\"{}\" asks for CUDA, but this tfw was built against a LibTorch without CUDA ({})", name,
                    build_description()),
        "set train.device = \"cpu\", or build tfw against PyTorch's CUDA wheel (README, \"Building on a GPU "
        "machine\")"};
  }
  if (const CudaLoad& load = cuda_load(); load.wanted && !load.loaded) {
    return DeviceProblem{
        fmt::format("\"{}\" asks for CUDA, but LibTorch's CUDA library could not be loaded: {}", name, load.error),
        "check that libtorch_cuda.so and the CUDA libraries it needs are beside libtorch_cpu.so "
        "(the same PyTorch wheel), or set train.device = \"cpu\""};
  }
  if (!cuda_available()) {
    return DeviceProblem{fmt::format("\"{}\" asks for CUDA, but there is no CUDA device on this machine (tfw is "
                                     "built with LibTorch {} and CUDA {})",
                                     name, torch_version(), torch_cuda_version()),
                         "set train.device = \"cpu\", or run on a machine with an NVIDIA GPU and its driver"};
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (parsed->index >= count) {
    return DeviceProblem{
        fmt::format("\"{}\", but this machine has {} CUDA device{}", name, count, count == 1 ? "" : "s"),
        fmt::format("use cuda:0 to cuda:{}", count - 1)};
  }
  return std::nullopt;
}

namespace {
// A config read in this process checks its device against this LibTorch and machine.
[[maybe_unused]] const bool device_check_installed = (device_check_install(&device_problem), true);
}  // namespace

torch::Device device_resolve(const std::string& name) {
  if (std::optional<DeviceProblem> problem = device_problem(name)) {
    throw UsageError(with_hint("train.device: " + problem->message, problem->hint));
  }
  return torch::Device(name);
}

torch::Device module_device(const torch::nn::Module& module) {
  for (const torch::Tensor& p : module.parameters()) return p.device();
  return torch::Device(torch::kCPU);
}

AutocastGuard::AutocastGuard(Precision precision, torch::Device device) {
  if (precision != Precision::bf16) return;
  active_ = true;
  cuda_ = device.is_cuda();
  const at::DeviceType type = cuda_ ? at::kCUDA : at::kCPU;
  was_enabled_ = at::autocast::is_autocast_enabled(type);
  was_dtype_ = at::autocast::get_autocast_dtype(type);
  at::autocast::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::set_autocast_enabled(type, true);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  const at::DeviceType type = cuda_ ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(type, was_enabled_);
  at::autocast::set_autocast_dtype(type, was_dtype_);
}

torch::Tensor at_least_float32(const torch::Tensor& x) {
  const auto type = x.scalar_type();
  return type == torch::kBFloat16 || type == torch::kHalf ? x.to(torch::kFloat32) : x;
}

}  // namespace tfw
