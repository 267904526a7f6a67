// The trainer's batch sampler (engine/train/trainer.cpp). Shapes: B batch, T sequence length.
#pragma once

#include <cstdint>
#include <random>
#include <sstream>
#include <string>

#include "engine/nn/libtorch.h"

#include "engine/data/shards.h"
#include "engine/core/error.h"

namespace tfw {

// Random windows of the train shard; the generator's state is the data cursor. A
// data-parallel rank draws all B starts of the global batch, as one process would, and
// keeps rows [first, first + count): every rank's generator stays in the same state, so the
// state in a checkpoint is valid for any world size.
class BatchSampler {
 public:
  BatchSampler(const TokenShard& shard, std::uint64_t seed) : shard_(shard), rng_(seed) {}
  // (count, T + 1) int64: inputs are [:, :T], targets [:, 1:].
  torch::Tensor next(std::int64_t B, std::int64_t T, std::int64_t first = 0, std::int64_t count = -1) {
    if (count < 0) count = B;
    torch::Tensor batch = torch::empty({count, T + 1}, torch::kInt64);
    auto rows = batch.accessor<std::int64_t, 2>();
    const std::uint64_t span = shard_.size() - static_cast<std::uint64_t>(T) - 1;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::uint64_t start = rng_() % (span + 1);
      if (b < first || b >= first + count) continue;
      for (std::int64_t t = 0; t <= T; ++t) rows[b - first][t] = shard_[start + t];
    }
    return batch;
  }
  std::string state() const {
    std::ostringstream out;
    out << rng_;
    return out.str();
  }
  void restore(const std::string& state) {
    std::istringstream in(state);
    in >> rng_;
    if (!in) throw UsageError("checkpoint has a corrupt data cursor (sampler state)");
  }

 private:
  const TokenShard& shard_;
  std::mt19937_64 rng_;
};

}  // namespace tfw
