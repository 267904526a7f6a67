#include "engine/machine/runtime.h"

#include "engine/core/error.h"
#include "engine/machine/cores.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <dlfcn.h>

#include <fmt/format.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <ATen/Version.h>
#include <ATen/detail/CUDAHooksInterface.h>

namespace tfw {

namespace {
int current_threads = 0;
int active_threads = 0;
bool explicit_threads = false;
std::string default_note;  // why OMP_NUM_THREADS was not used, from the last default taken
}  // namespace

void runtime_init(int threads) {
  explicit_threads = threads > 0;
  if (threads <= 0) threads = threads_default(&default_note);
  torch::set_num_threads(threads);
  current_threads = threads;
  active_threads = threads;
}

int runtime_threads() { return current_threads; }
const std::string& runtime_threads_note() { return default_note; }
bool runtime_threads_explicit() { return explicit_threads; }

void runtime_use_threads(int threads) {
  if (threads < 1) threads = 1;
  if (threads == active_threads) return;
  torch::set_num_threads(threads);
  active_threads = threads;
}

int runtime_active_threads() { return active_threads; }

const char* torch_version() { return TORCH_VERSION; }

std::string cpu_capability() { return at::get_cpu_capability(); }

namespace {
// Read once, before tfw sets it: the user's own choice of kernels.
const bool kernels_from_environment = std::getenv("ATEN_CPU_CAPABILITY") != nullptr;
bool kernels_chosen = false;

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// ATEN_CPU_CAPABILITY's spelling of a capability: "avx2".
std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}
}  // namespace

// ATen's own test (aten/src/ATen/native/DispatchStub.cpp): its AVX-512 kernels need AVX-512
// VL, BW and DQ with FMA; its AVX2 kernels, AVX2 with FMA. ATen trusts ATEN_CPU_CAPABILITY
// without this test, so asking for kernels the processor lacks would end in SIGILL.
std::vector<std::string> cpu_capabilities_available() {
  std::vector<std::string> out;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  if (fma && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq")) {
    out.push_back("AVX512");
  }
  if (fma && __builtin_cpu_supports("avx2")) out.push_back("AVX2");
#endif
  out.push_back("DEFAULT");
  return out;
}

namespace {
bool processor_runs(const std::string& capability) {
  const std::vector<std::string> available = cpu_capabilities_available();
  return std::find(available.begin(), available.end(), capability) != available.end();
}
}  // namespace

void cpu_capability_choose(const std::string& name) {
  const std::string wanted = upper(name);
  if (!processor_runs(wanted)) {
    std::string have;
    for (const std::string& a : cpu_capabilities_available()) have += (have.empty() ? "" : ", ") + a;
    const bool known = wanted == "AVX512" || wanted == "AVX2" || wanted == "DEFAULT";
    throw UsageError(
        with_hint(known ? fmt::format("--kernels {}: this processor cannot run ATen's {} kernels", name, wanted)
                        : fmt::format("--kernels {}: not a set of ATen's CPU kernels", name),
                  fmt::format("choose one this processor has: {} (in any case)", have)));
  }
  ::setenv("ATEN_CPU_CAPABILITY", lower(wanted).c_str(), 1);
  kernels_chosen = true;
}

bool cpu_capability_explicit() { return kernels_chosen || kernels_from_environment; }

void cpu_capability_keep(const std::string& recorded) {
  if (recorded.empty() || cpu_capability_explicit() || !processor_runs(recorded)) return;
  ::setenv("ATEN_CPU_CAPABILITY", lower(recorded).c_str(), 1);
}

#ifndef TFW_TORCH_CUDA
#define TFW_TORCH_CUDA ""
#endif
const char* torch_cuda_version() { return TFW_TORCH_CUDA; }

// An NVIDIA driver: its device files (Linux; /dev/dxg under WSL), or its library where a
// container maps the library without them. The library, once found, stays loaded: LibTorch's
// CUDA half uses it.
bool cuda_driver_present() {
  std::error_code ec;
  for (const char* path : {"/dev/nvidiactl", "/proc/driver/nvidia/version", "/dev/dxg"}) {
    if (std::filesystem::exists(path, ec)) return true;
  }
  return dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
}

namespace {

// Loads LibTorch's CUDA half where it can be used (runtime.h). dlopen finds it through the
// engine's RUNPATH, beside libtorch_cpu.so; RTLD_GLOBAL lets its kernels and hooks register
// themselves with LibTorch as they would have, linked.
CudaLoad cuda_half_load() {
  CudaLoad load;
  const char* asked = std::getenv("TFW_LOAD_CUDA");
  const std::string mode = asked != nullptr ? asked : "";
  if (std::string(TFW_TORCH_CUDA).empty() || mode == "0") return load;
  load.wanted = mode == "1" || cuda_driver_present();
  if (load.wanted && dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* error = dlerror();
    load.error = error != nullptr ? error : "dlopen failed";
  }
  // A binary that links it anyway (a program of the user's) has it whatever was wanted.
  load.loaded = at::detail::getCUDAHooks().isBuilt();
  return load;
}

}  // namespace

const CudaLoad& cuda_load() {
  static const CudaLoad load = cuda_half_load();
  return load;
}

namespace {
// As the engine loads: before anything in this process asks LibTorch about CUDA.
[[maybe_unused]] const bool cuda_loaded_at_start = (cuda_load(), true);
}  // namespace

bool torch_has_cuda() { return !std::string(TFW_TORCH_CUDA).empty(); }

int cuda_device_count() {
  if (!cuda_load().loaded) return 0;
  return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

std::string build_description() {
  std::string text = std::string("LibTorch ") + TORCH_VERSION;
  if (std::string(TFW_TORCH_CUDA).empty()) return text + ", CPU only";
  const CudaLoad& load = cuda_load();
  if (load.wanted && !load.loaded) {
    return text + ", CUDA " + TFW_TORCH_CUDA + " (libtorch_cuda.so not loaded: " + load.error + ")";
  }
  const int devices = cuda_device_count();
  text += std::string(", CUDA ") + TFW_TORCH_CUDA + ", ";
  if (devices == 0) return text + (load.wanted ? "no CUDA device" : "no CUDA device (no NVIDIA driver)");
  return text + std::to_string(devices) + " CUDA device" + (devices == 1 ? "" : "s");
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model.empty()) model = value;
    if (key == "flags" && flags.empty()) flags = " " + value + " ";
  }
  if (model.empty()) return "unknown";
  if (flags.find(" amx_tile ") != std::string::npos) model += " (AMX)";
  return model;
}

std::string compute_device_name(const std::string& device) {
  // The GPU's name needs the CUDA runtime's headers, which the engine does not compile
  // against yet: the device and the LibTorch's CUDA say what ran.
  if (device.rfind("cuda", 0) == 0) return fmt::format("CUDA device {} of {}", device, cuda_device_count());
  return cpu_model();
}

bool fused_attention_available() { return TORCH_VERSION_MAJOR >= 2; }

}  // namespace tfw
