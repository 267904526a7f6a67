// Internal to byte-level BPE: the byte map that its encoder (byte_level_bpe.cpp) and its
// .tiktoken reader (gpt2_tokenizer.cpp) share. Torch-free.
#pragma once

#include <array>
#include <string>

namespace tfw {

// Each byte's symbol in byte-level BPE's vocabularies and merges, as UTF-8.
std::array<std::string, 256> byte_symbols();

}  // namespace tfw
