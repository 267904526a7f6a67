// Byte-level BPE tokenizers (docs/import.md, "Tokenizers"): GPT-2's from its encoder.json and
// vocab.bpe, and any Hugging Face tokenizer.json of the same kind (model.type "BPE", a
// ByteLevel pre-tokenizer with GPT-2's split, optionally NFC normalisation and added special
// tokens), such as the GPT-NeoX-20B tokenizer the official TokenFormer releases use.
// Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/tokenizer.h"

namespace tfw {

// The largest token id a byte-level BPE tokenizer may have (2^21 - 1: about 8 times the
// largest vocabularies in use); its id table is allocated up to it.
inline constexpr std::uint32_t kMaxTokenId = (1u << 21) - 1;

struct ByteLevelBpeSpec {
  std::string name;                                          // what name() returns
  std::vector<std::pair<std::string, std::uint32_t>> vocab;  // symbols (byte-mapped text) -> id
  std::vector<std::pair<std::string, std::string>> merges;   // by rank
  std::vector<std::pair<std::string, std::uint32_t>> added;  // special tokens, matched in raw text first
  bool add_prefix_space = false;                             // ByteLevel's add_prefix_space
  bool nfc = false;                                          // an NFC normaliser
};

// GPT-2's data in `dir`: gpt2.tiktoken (GPT-2's byte-level BPE ranks, as the PyPI package
// openai-whisper ships them in whisper/assets/) or, where that is absent, encoder.json and
// vocab.bpe (GPT-2's original files): 50,257 tokens (<|endoftext|> is 50256) and 50,000 merges.
ByteLevelBpeSpec bpe_spec_from_gpt2_files(const std::string& dir);

// A .tiktoken rank file (one "BASE64 RANK" line per token, rank = id = merge order), with the
// merges recovered from the ranks, and `specials` added to the vocabulary as (text, id).
// UsageError naming the file and the line for anything malformed; bounded in size and work.
ByteLevelBpeSpec bpe_spec_from_tiktoken(const std::string& path,
                                        const std::vector<std::pair<std::string, std::uint32_t>>& specials);

// A tokenizer.json. UsageError naming the file and the reason for anything else: another
// model type (WordPiece, Unigram, ...), a missing vocabulary or merges list, another
// pre-tokenizer or normaliser, a malformed merge.
ByteLevelBpeSpec bpe_spec_from_tokenizer_json(const std::string& path);

std::unique_ptr<Tokenizer> byte_level_bpe_create(ByteLevelBpeSpec spec);

}  // namespace tfw
