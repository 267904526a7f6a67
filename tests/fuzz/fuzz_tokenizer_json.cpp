// libFuzzer target: a tokenizer.json (engine/data/bpe.h) from arbitrary bytes, then, when it
// is accepted, the tokenizer built from it encoding and decoding a fixed text and the input
// itself. Any outcome but a tokenizer or a UsageError is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "engine/data/bpe.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/tfw-fuzz-tokenizer-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    std::unique_ptr<tfw::Tokenizer> tokenizer = tfw::byte_level_bpe_create(tfw::bpe_spec_from_tokenizer_json(path));
    std::vector<std::uint32_t> ids;
    tokenizer->encode("Hello, world! <|endoftext|> caf\xc3\xa9  \n\t 12345", ids);
    tokenizer->encode(std::string_view(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 4096)), ids);
    (void)tokenizer->decode(ids);
  } catch (const tfw::UsageError&) {}
  return 0;
}
