#include "engine/machine/memory_check.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "engine/config/loss_chunks.h"
#include "engine/core/error.h"
#include "engine/machine/cuda_info.h"

namespace tfw {

double train_memory_bytes(const RunConfig& config, const TrainPlan& plan, std::int64_t micro_batch) {
  const ModelSpec& spec = *config.model.spec;
  const ModelShape shape = spec.shape();
  const double parameters = static_cast<double>(spec.parameter_count());
  const double layers = static_cast<double>(shape.layers), d = static_cast<double>(shape.d);
  const double T = static_cast<double>(plan.seq_len), heads = static_cast<double>(shape.heads);
  const double vocab = static_cast<double>(shape.vocab);
  const double N = static_cast<double>(spec.flops_per_token(plan.seq_len).token_parameter) / 2;
  // CUDA's attention is the fused kernel (engine/nn/attention.h): a row's log-sum-exp, not its T probabilities.
  const double attention = config.train.device.is_cuda() ? 2 * heads : 2 * heads * T;
  const double tokens = static_cast<double>(micro_batch) * T;
  double logits = 2 * vocab, once = 0;
  const bool language_model = shape.image_size == 0;
  if (language_model && loss_chunked(micro_batch * plan.seq_len, shape.vocab)) {
    logits = 2 * d;
    once = 4 * 3 * static_cast<double>(kChunkRows) * vocab;
  }
  const double per_token = layers * (N / std::max(1.0, layers * d) + 16 * d + attention) + logits;
  const double training = 16 * parameters + 4 * per_token * tokens + once;
  if (!language_model) return training;
  // Validation keeps no activations, but builds a micro-batch's full logits: the model's, a
  // float32 copy (or a copy of the padded vocabulary's first columns) and their log-softmax,
  // 12 bytes a token and vocabulary entry; beside weights, gradients, AdamW's moments and
  // autocast's bf16 copies of the weights (18 bytes a parameter).
  return std::max(training, 18 * parameters + 12 * vocab * tokens);
}

double train_memory_bytes(const RunConfig& config, const TrainPlan& plan) {
  return train_memory_bytes(config, plan, config.train.batch_size);
}

MemoryAvailable train_memory_available(const RunConfig& config) {
  // On a GPU the memory that counts is what the device has free now (other processes and
  // this one's earlier allocations taken off); on the CPU the machine's physical memory.
  MemoryAvailable there;
  there.bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  there.where = fmt::format("this machine has {:.3g} GB", there.bytes / 1e9);
  const DeviceName& device = config.train.device;
  if (device.is_cuda()) {
    const int index = std::max(device.index, 0);  // "cuda" or "cuda:N"
    if (const std::optional<CudaMemory> memory = cuda_memory(index)) {
      there.bytes = static_cast<double>(memory->free_bytes);
      there.where = fmt::format("GPU cuda:{} has {:.3g} GB free of {:.3g} GB", index, there.bytes / 1e9,
                                static_cast<double>(memory->total_bytes) / 1e9);
    }
  }
  const double limit = config.train.memory_limit_gb * 1e9;
  if (limit > 0 && (there.bytes <= 0 || limit < there.bytes)) {
    there.where = fmt::format("train.memory_limit_gb allows {:.3g} GB ({})", limit / 1e9, there.where);
    there.bytes = limit;
  }
  return there;
}

MicroBatch micro_batch_choose(const RunConfig& config, const TrainPlan& plan, double have_bytes,
                              const std::string& where, std::int64_t world) {
  const std::int64_t B = config.train.batch_size;
  const double room = have_bytes * kAutoMemoryShare;
  MicroBatch smallest;
  for (std::int64_t accum = 1; accum <= B; ++accum) {
    if (B % accum != 0 || (B / accum) % world != 0) continue;
    const MicroBatch split{B / accum, accum, train_memory_bytes(config, plan, B / accum)};
    if (have_bytes <= 0 || split.need_bytes <= room) return split;
    smallest = split;
  }
  if (smallest.size == 0) {  // no split gives every rank a whole share
    throw UsageError(with_hint(fmt::format("train.batch_size = {} cannot be split into micro-batches of a multiple "
                                           "of {} sequences (one a rank)",
                                           B, world),
                               fmt::format("choose a batch size that is a multiple of {}", world)));
  }
  throw UsageError(with_hint(
      fmt::format("{} needs about {:.3g} GB of memory to train even with train.grad_accum = \"auto\"'s smallest "
                  "micro-batch ({} x {} tokens, {} of them a step; model {}); {}, of which auto plans within {:.0f}%",
                  config.model.name, smallest.need_bytes / 1e9, smallest.size, plan.seq_len, smallest.accum,
                  config.model.spec->summary(), where, kAutoMemoryShare * 100),
      "use a smaller model or a shorter train.seq_len"));
}

void refuse_auto_split_with_ranks(const RunConfig& config, bool ranks) {
  if (!ranks || !config.train.grad_accum_auto) return;
  throw UsageError(
      with_hint("train.grad_accum = \"auto\" chooses the micro-batch for one process; ranks could find "
                "different memory free and disagree",
                "give data-parallel runs a number: train.grad_accum = N, with train.batch_size the "
                "micro-batch (a step is N x train.batch_size)"));
}

std::int64_t forward_batch(const RunConfig& config, std::int64_t kept) {
  const std::int64_t B = config.train.batch_size;
  if (!config.train.grad_accum_auto) return B;
  if (kept > 0 && B % kept == 0) return kept;
  const MemoryAvailable there = train_memory_available(config);
  return micro_batch_choose(config, train_plan(config), there.bytes, there.where).size;
}

void train_memory_check(const RunConfig& config, const TrainPlan& plan) {
  const MemoryAvailable there = train_memory_available(config);
  if (config.train.grad_accum_auto) {
    // The split itself is the trainer's (it says what it chose); here only whether one fits.
    micro_batch_choose(config, plan, there.bytes, there.where);
    return;
  }
  const double need = train_memory_bytes(config, plan);
  if (there.bytes > 0 && need > there.bytes) {
    throw UsageError(with_hint(fmt::format("{} needs about {:.3g} GB of memory to train (model {}, batch {} x {} "
                                           "tokens); {}",
                                           config.model.name, need / 1e9, config.model.spec->summary(),
                                           config.train.batch_size, plan.seq_len, there.where),
                               "use a smaller model or train.batch_size (with train.grad_accum for the same batch, or "
                               "train.grad_accum = \"auto\")"));
  }
}

}  // namespace tfw
