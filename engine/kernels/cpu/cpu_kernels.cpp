// Which CPU kernels run, decided in a file compiled with the default flags: the AVX2 file may
// hold instructions this CPU cannot run, so the question is never asked there.
#include "engine/kernels/cpu/pattention_kernels.h"

#include "engine/core/env_choice.h"

namespace tfw {

namespace {
EnvChoice scalar_chosen("TFW_PATTENTION_SCALAR", "1");
}  // namespace

namespace pattention_kernels {
bool avx2_available() {
  static const bool available = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return available;
}
}  // namespace pattention_kernels

bool pattention_fused_vectorised() { return pattention_kernels::avx2_available() && !scalar_chosen.on(); }

}  // namespace tfw
