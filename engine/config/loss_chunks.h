// When a language model's loss goes a block of rows at a time (engine/train/lm_loss.h), stated
// without torch: the memory check (engine/machine/memory_check.h) counts what that loss keeps.
#pragma once

#include <cstdint>

namespace tfw {

// A micro-batch of `rows` rows and a vocabulary of `vocab` takes the chunked loss when its
// fp32 logits would pass kChunkedLossBytes (256 MiB); smaller ones keep the plain loss, and
// their numbers, bit for bit. The chunked loss holds kChunkRows rows of logits at a time.
constexpr std::int64_t kChunkedLossBytes = std::int64_t{256} << 20;
constexpr std::int64_t kChunkRows = 2048;
inline bool loss_chunked(std::int64_t rows, std::int64_t vocab) { return rows * vocab * 4 > kChunkedLossBytes; }

}  // namespace tfw
