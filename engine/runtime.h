// Process-wide engine set-up: torch's intra-op threads default to 1 on this Debian build,
// so every entry point (the CLI, tests, benchmarks) calls runtime_init() first.
#pragma once

namespace tfw {

// Sets torch's thread count to `threads`, or to the machine's core count when 0.
void runtime_init(int threads = 0);

// The thread count runtime_init() set (0 before it is called): the most a run uses.
int runtime_threads();

// Sets torch's thread count for now without changing runtime_threads(): the ThreadGovernor
// (engine/load.h) lowers it while other processes are busy. 1 <= threads.
void runtime_use_threads(int threads);
int runtime_active_threads();

// The LibTorch version the engine was compiled against, "1.13.0".
const char* torch_version();

// True when causal attention uses the fused scaled_dot_product_attention (LibTorch >= 2).
bool fused_attention_available();

}  // namespace tfw
