#include "engine/machine/memory_check.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/machine/cuda_info.h"

namespace tfw {

double train_memory_bytes(const RunConfig& config, const TrainPlan& plan) {
  const ModelSpec& spec = *config.model.spec;
  const ModelShape shape = spec.shape();
  const double parameters = static_cast<double>(spec.parameter_count());
  const double layers = static_cast<double>(shape.layers), d = static_cast<double>(shape.d);
  const double T = static_cast<double>(plan.seq_len);
  const double N = static_cast<double>(spec.flops_per_token(plan.seq_len).token_parameter) / 2;
  const double per_token =
      layers * (N / std::max(1.0, layers * d) + 16 * d + 2 * static_cast<double>(shape.heads) * T) +
      2 * static_cast<double>(shape.vocab);
  const double tokens = static_cast<double>(config.train.batch_size) * T;
  return 16 * parameters + 4 * per_token * tokens;
}

void train_memory_check(const RunConfig& config, const TrainPlan& plan) {
  const double need = train_memory_bytes(config, plan);
  // On a GPU the memory that counts is what the device has free now (other processes and
  // this one's earlier allocations taken off); on the CPU the machine's physical memory.
  const DeviceName& device = config.train.device;
  double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  std::string where = fmt::format("this machine has {:.3g} GB", have / 1e9);
  if (device.is_cuda()) {
    const int index = std::max(device.index, 0);  // "cuda" or "cuda:N"
    if (const std::optional<CudaMemory> memory = cuda_memory(index)) {
      have = static_cast<double>(memory->free_bytes);
      where = fmt::format("GPU cuda:{} has {:.3g} GB free of {:.3g} GB", index, have / 1e9,
                          static_cast<double>(memory->total_bytes) / 1e9);
    }
  }
  if (have > 0 && need > have) {
    throw UsageError(with_hint(fmt::format("{} needs about {:.3g} GB of memory to train (model {}, batch {} x {} "
                                           "tokens); {}",
                                           config.model.name, need / 1e9, config.model.spec->summary(),
                                           config.train.batch_size, plan.seq_len, where),
                               "use a smaller model or train.batch_size (with train.grad_accum for the same batch)"));
  }
}

}  // namespace tfw
