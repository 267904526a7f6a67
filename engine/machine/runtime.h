// Process-wide engine set-up: torch's intra-op threads are set explicitly,
// so every entry point (the CLI, tests, benchmarks) calls runtime_init() first.
#pragma once

#include <string>
#include <vector>

namespace tfw {

// Sets torch's thread count to `threads`, or when 0 to threads_default() (engine/machine/cores.h:
// OMP_NUM_THREADS, else the cores this process may run on). A count given (threads > 0, e.g.
// --threads) is explicit: a resumed run then keeps it instead of the count it recorded.
void runtime_init(int threads = 0);
bool runtime_threads_explicit();

// The thread count runtime_init() set (0 before it is called): the most a run uses.
int runtime_threads();

// Where runtime_init() took the default and OMP_NUM_THREADS was set but unusable, the line
// that says so (threads_default, engine/machine/cores.h); "" otherwise. The CLI says it when
// no --threads chose instead.
const std::string& runtime_threads_note();

// Sets torch's thread count for now without changing runtime_threads(): the ThreadGovernor
// (engine/machine/cpu_load.h) lowers it while other processes are busy. 1 <= threads.
void runtime_use_threads(int threads);
int runtime_active_threads();

// The LibTorch version the engine was compiled against, "2.11.0".
const char* torch_version();

// The CPU kernels ATen dispatches to on this machine: "AVX512", "AVX2", "DEFAULT" (its widest
// vector ISA, or ATEN_CPU_CAPABILITY's choice). The same config and seed give the same numbers
// only under the same capability: AVX-512 and AVX2 kernels round differently.
std::string cpu_capability();

// The kernel sets this machine's processor can run, widest first ("AVX512", "AVX2", "DEFAULT"
// on x86-64; "DEFAULT" elsewhere), by the test ATen itself makes.
std::vector<std::string> cpu_capabilities_available();

// `tfw --kernels NAME` (avx512, avx2 or default, any case): ATen dispatches to those kernels in
// this process and the processes it starts (ATEN_CPU_CAPABILITY). Must run before ATen's first
// CPU kernel. UsageError, naming what the processor has, for a name it cannot run.
void cpu_capability_choose(const std::string& name);

// Whether the kernels were chosen for this process: --kernels, or ATEN_CPU_CAPABILITY in the
// environment tfw started with. A resumed run then keeps the choice instead of its own.
bool cpu_capability_explicit();

// A resumed run keeps the kernels it recorded (`recorded`, "" for none), as it keeps its thread
// count: unless they were chosen (above) or the processor lacks them, ATen is asked for them.
// Call before ATen's first CPU kernel; the trainer says which kernels it got, and why.
void cpu_capability_keep(const std::string& recorded);

// The CUDA version that LibTorch was built with, "13.0"; "" for a CPU-only LibTorch.
const char* torch_cuda_version();

// LibTorch's CUDA half (libtorch_cuda.so, which brings cuBLAS, cuDNN, NCCL and the rest: about
// 350 MB mapped and 0.2 s of every start) is not linked: it is loaded as the engine loads, and
// only on a machine with an NVIDIA driver (/dev/nvidiactl, /proc/driver/nvidia/version or
// /dev/dxg, or else the driver's libcuda.so.1 where the loader finds it).
// TFW_LOAD_CUDA=1 loads it anyway, TFW_LOAD_CUDA=0 never. It has to be there before LibTorch
// is first asked about CUDA, which keeps its first answer for the life of the process.
struct CudaLoad {
  bool wanted = false;  // this LibTorch has CUDA, and the machine has a driver (or TFW_LOAD_CUDA=1)
  bool loaded = false;  // its hooks are registered: LibTorch can run CUDA kernels in this process
  std::string error;    // why it was wanted and not loaded (dlopen's message)
};
const CudaLoad& cuda_load();
// Whether this machine has an NVIDIA driver, by the rule above (TFW_LOAD_CUDA aside).
bool cuda_driver_present();

// Whether the LibTorch tfw was built against has CUDA (a CUDA wheel), loaded here or not; and
// the CUDA devices it sees on this machine (0 without a GPU, a driver, or its CUDA half loaded).
bool torch_has_cuda();
int cuda_device_count();

// One line for tfw --version and reports: "LibTorch 2.11.0, CUDA 13.0, no CUDA device", with
// "(no NVIDIA driver)" where the CUDA half was not loaded for want of one.
std::string build_description();

// The processor's name as /proc/cpuinfo gives it ("AMD EPYC 9R14 96-Core Processor"), with
// " (AMX)" when it has AMX tiles, which change which bf16 kernels run; "unknown" where
// /proc/cpuinfo cannot be read.
std::string cpu_model();

// What computes on `device` ("cpu", "cuda", "cuda:1"): the CPU's model, or for CUDA the
// device and how many there are (the GPU's name is not read yet).
std::string compute_device_name(const std::string& device);

// True when causal attention uses the fused scaled_dot_product_attention (LibTorch >= 2).
bool fused_attention_available();

}  // namespace tfw
