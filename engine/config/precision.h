// The precision the engine computes in (train.precision), as a value. Torch-free, so that the
// typed config (run_config.h) holds it; engine/machine/device.h applies it (AutocastGuard).
#pragma once

#include <string>

#include "engine/core/error.h"

namespace tfw {

// fp32: everything in float32. bf16: bf16 autocast for the matmuls, fp32 master weights,
// optimiser state, normalisations and loss.
enum class Precision { fp32, bf16 };

// "fp32" | "bf16"; throws UsageError for anything else.
inline Precision precision_parse(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  throw UsageError(with_hint("unknown precision \"" + name + "\"", "use \"fp32\" or \"bf16\""));
}

inline std::string precision_name(Precision precision) { return precision == Precision::bf16 ? "bf16" : "fp32"; }

}  // namespace tfw
