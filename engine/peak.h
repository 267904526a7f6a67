// The machine's peak FLOP/s for MFU: measured once with a float32 matmul probe at the
// current thread count and cached in TFW_HOME/machine.toml (per host and thread count).
#pragma once

#include <string>

namespace tfw {

// `configured` > 0 wins; else the cached value; else measure (about a second) and cache.
double peak_flops_resolve(const std::string& home, double configured);

}  // namespace tfw
