// Built-in tokenizers. See tokenizer.h.
#include "engine/data/tokenizer.h"

#include <fmt/format.h>

#include "engine/error.h"

namespace tfw {

namespace {

class ByteTokenizer : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  std::uint32_t vocab_size() const override { return 256; }
  void encode(std::string_view text, std::vector<std::uint32_t>& out) const override {
    out.reserve(out.size() + text.size());
    for (char c : text) out.push_back(static_cast<unsigned char>(c));
  }
  std::string decode(const std::vector<std::uint32_t>& ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (std::uint32_t id : ids) {
      if (id > 255) throw UsageError(fmt::format("byte tokenizer: id {} is not a byte (0..255)", id));
      text.push_back(static_cast<char>(id));
    }
    return text;
  }
};

}  // namespace

std::unique_ptr<Tokenizer> gpt2_tokenizer_create();  // gpt2_tokenizer.cpp

std::unique_ptr<Tokenizer> tokenizer_create(const std::string& name) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return gpt2_tokenizer_create();
  throw UsageError(with_hint(fmt::format("unknown tokenizer '{}'", name), "known tokenizers: byte, gpt2"));
}

}  // namespace tfw
