// The machine's peak FLOP/s for MFU: measured once with a float32 matmul probe at the
// current thread count and cached in TFW_HOME/machine.toml (per host and thread count). A
// probe taken while other processes kept the cores busy (load.h) is used but not cached.
#pragma once

#include <string>

namespace tfw {

// `configured` > 0 wins; else the cached value; else measure (about a second) and cache it,
// unless other processes contended for the cores during the probe.
double peak_flops_resolve(const std::string& home, double configured);

}  // namespace tfw
