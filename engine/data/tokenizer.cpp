// Built-in tokenizers. See tokenizer.h.
#include "engine/data/tokenizer.h"
#include "engine/core/home.h"

#include <fstream>

#include <fmt/format.h>

#include "engine/data/bpe.h"
#include "engine/core/error.h"
#include "engine/core/files.h"

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

std::string tokenizer_label(const std::string& name) {
  if (!tokenizer_is_file(name)) return name;
  if (!std::ifstream(name, std::ios::binary)) {
    throw UsageError(with_hint(fmt::format("tokenizer {}: cannot read the file", name),
                               "name an existing tokenizer.json, or byte or gpt2"));
  }
  return fmt::format("json-{:08x}", file_crc32(name));
}

std::unique_ptr<Tokenizer> tokenizer_create(const std::string& name) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return gpt2_tokenizer_create();
  if (tokenizer_is_file(name)) {
    confine_check(name, "data.tokenizer");
    ByteLevelBpeSpec spec = bpe_spec_from_tokenizer_json(name);
    spec.name = tokenizer_label(name);
    return byte_level_bpe_create(std::move(spec));
  }
  throw UsageError(with_hint(fmt::format("unknown tokenizer '{}'", name),
                             "known tokenizers: byte, gpt2, or the path of a Hugging Face tokenizer.json"));
}

}  // namespace tfw
