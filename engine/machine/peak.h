// The machine's peak FLOP/s for MFU: measured once with a float32 matmul probe at the
// current thread count and cached in TFW_HOME/machine.toml (per host and thread count). A
// probe taken while other processes kept the cores busy (cpu_load.h) is neither used nor cached:
// the peak is then 0, "not measured", and so is the run's MFU.
#pragma once

#include <string>

#include "engine/config/device_name.h"
#include "engine/config/precision.h"

namespace tfw {

// `configured` > 0 wins; else the cached value; else measure (about a second) and cache it;
// 0 when other processes contended for the cores during the probe.
double peak_flops_resolve(const std::string& home, double configured);

// The same for a training on `device` (cpu, cuda, cuda:N) in `precision` (fp32, bf16):
// on CUDA the probe is an 8192³ matrix product on that device in bf16 (or float32,
// under the process's TF32 setting), the best of 5 rounds of 10 after warming up, cached per
// host, device and precision. The CPU is the function above (float32, per thread count).
double peak_flops_resolve(const std::string& home, double configured, const DeviceName& device, Precision precision);

}  // namespace tfw
