// The specs of byte-level BPE tokenizers (engine/data/bpe.h; byte_level_bpe.cpp runs them),
// from three sources: GPT-2's ranks in gpt2.tiktoken (from the PyPI package openai-whisper, MIT
// licence, put in build/tokenizers/gpt2 by scripts/setup), GPT-2's original encoder.json +
// vocab.bpe, and a Hugging Face tokenizer.json of a byte-level BPE (the official TokenFormer
// releases' GPT-NeoX-20B tokenizer, say); and the gpt2 tokenizer, from GPT-2's data where it is
// found.
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/data/bpe.h"
#include "engine/data/bpe_byte_map.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/plugin/registry.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;

bool has_tiktoken(const std::string& dir) { return fs::is_regular_file(dir + "/gpt2.tiktoken"); }
bool has_json_files(const std::string& dir) {
  return fs::is_regular_file(dir + "/encoder.json") && fs::is_regular_file(dir + "/vocab.bpe");
}

std::string find_data_dir() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TFW_GPT2_DIR")) candidates.push_back(env);
  if (const char* home = std::getenv("TFW_HOME")) candidates.push_back(std::string(home) + "/tokenizers/gpt2");
  candidates.push_back("tfw-home/tokenizers/gpt2");
  candidates.push_back(executable_dir() + "/tokenizers/gpt2");
  for (const std::string& dir : candidates) {
    if (has_tiktoken(dir) || has_json_files(dir)) return dir;
  }
  throw UsageError(with_hint(
      fmt::format("the gpt2 tokenizer's data (gpt2.tiktoken, or encoder.json and vocab.bpe) was not found in: {}",
                  fmt::join(candidates, ", ")),
      "bash scripts/setup takes gpt2.tiktoken from the PyPI package openai-whisper into build/tokenizers/gpt2; "
      "or set TFW_GPT2_DIR to a folder holding it"));
}

// Base64 (RFC 4648, with padding) of one line of a .tiktoken file; false on anything else.
bool base64_decode(std::string_view text, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (text[i + 2] == '=' && text[i + 3] != '=') return false;
    std::uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) {
      const int v = k >= 4 - pad ? 0 : value(text[i + k]);
      if (v < 0) return false;
      bits = (bits << 6) | static_cast<std::uint32_t>(v);
    }
    out.push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out.push_back(static_cast<char>((bits >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return true;
}

}  // namespace

// A .tiktoken file: one "BASE64 RANK" line per token, ranks 0..N-1 each once, every single byte
// among them. A rank is the token's id and the order of the merge that made it, so the merges
// are recovered by running BPE on each token's bytes with only lower ranks allowed: the two
// parts left are its merge (what Hugging Face's tiktoken converter does). Bounded: file size,
// token count and length, and the total work of the recovery.
ByteLevelBpeSpec bpe_spec_from_tiktoken(const std::string& path,
                                        const std::vector<std::pair<std::string, std::uint32_t>>& specials) {
  constexpr std::uintmax_t kMaxFileBytes = 64u << 20;
  constexpr std::size_t kMaxTokens = 1u << 20;
  constexpr std::size_t kMaxTokenBytes = 1024;
  constexpr std::uint64_t kMaxMergeWork = 200'000'000;  // pair look-ups; GPT-2's file needs about 2.5 million
  auto fail = [&](const std::string& what) -> void {
    throw UsageError(with_hint(fmt::format("{}: {}", path, what),
                               "a .tiktoken file holds one 'BASE64 RANK' line per token, ranks 0..N-1 (GPT-2's: "
                               "whisper/assets/gpt2.tiktoken of the PyPI package openai-whisper)"));
  };
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) fail("cannot read the file");
  if (size > kMaxFileBytes) fail(fmt::format("is {} bytes, over the limit of {}", size, kMaxFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the file");
  std::vector<std::string> by_rank;
  std::vector<bool> seen;
  std::vector<std::pair<std::string, std::uint32_t>> lines;
  std::string line, bytes;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (lines.size() >= kMaxTokens) fail(fmt::format("holds over {} tokens", kMaxTokens));
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size()) {
      fail(fmt::format("line {} is not 'BASE64 RANK'", number));
    }
    const std::string_view rank_text = std::string_view(line).substr(space + 1);
    std::uint64_t rank = 0;
    for (char c : rank_text) {
      if (c < '0' || c > '9' || rank > kMaxTokens)
        fail(fmt::format("line {}: the rank '{}' is not an id", number, rank_text));
      rank = rank * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (!base64_decode(std::string_view(line).substr(0, space), bytes))
      fail(fmt::format("line {}: not base64", number));
    if (bytes.size() > kMaxTokenBytes)
      fail(fmt::format("line {}: a token of {} bytes (limit {})", number, bytes.size(), kMaxTokenBytes));
    lines.emplace_back(bytes, static_cast<std::uint32_t>(rank));
  }
  const std::size_t n = lines.size();
  by_rank.resize(n);
  seen.assign(n, false);
  std::unordered_map<std::string, std::uint32_t> rank_of;
  rank_of.reserve(n);
  for (auto& [token, rank] : lines) {
    if (rank >= n) fail(fmt::format("the rank {} is not below the token count {}", rank, n));
    if (seen[rank]) fail(fmt::format("the rank {} appears twice", rank));
    if (!rank_of.emplace(token, rank).second) fail(fmt::format("a token appears twice (rank {})", rank));
    seen[rank] = true;
    by_rank[rank] = std::move(token);
  }
  for (int b = 0; b < 256; ++b) {
    if (rank_of.count(std::string(1, static_cast<char>(b))) == 0) fail(fmt::format("the byte {} has no token", b));
  }
  const std::array<std::string, 256> symbol = byte_symbols();
  auto symbols_of = [&](const std::string& token) {
    std::string out;
    for (char c : token) out += symbol[static_cast<unsigned char>(c)];
    return out;
  };
  ByteLevelBpeSpec spec;
  spec.name = "gpt2";
  spec.vocab.reserve(n + specials.size());
  std::uint64_t work = 0;
  std::vector<std::string> parts;
  for (std::uint32_t rank = 0; rank < n; ++rank) {
    const std::string& token = by_rank[rank];
    spec.vocab.emplace_back(symbols_of(token), rank);
    if (token.size() < 2) continue;
    parts.clear();
    for (char c : token) parts.emplace_back(1, c);
    while (parts.size() > 2) {
      std::uint32_t best_rank = rank;
      std::size_t best = 0;
      for (std::size_t k = 0; k + 1 < parts.size(); ++k) {
        const auto found = rank_of.find(parts[k] + parts[k + 1]);
        if (found != rank_of.end() && found->second < best_rank) {
          best_rank = found->second;
          best = k;
        }
      }
      work += parts.size();
      if (work > kMaxMergeWork) fail("recovering the merges takes too long: not a BPE rank file");
      if (best_rank == rank) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    if (parts.size() != 2) {
      fail(fmt::format("the token of rank {} is not a merge of two lower-ranked tokens: not a BPE rank file", rank));
    }
    spec.merges.emplace_back(symbols_of(parts[0]), symbols_of(parts[1]));
  }
  for (const auto& [text, id] : specials) spec.vocab.emplace_back(text, id);
  return spec;
}

ByteLevelBpeSpec bpe_spec_from_gpt2_files(const std::string& dir) {
  if (has_tiktoken(dir)) {
    ByteLevelBpeSpec spec = bpe_spec_from_tiktoken(dir + "/gpt2.tiktoken", {{"<|endoftext|>", 50256}});
    if (spec.vocab.size() != 50257 || spec.merges.size() != 50000) {
      throw UsageError(
          fmt::format("{}/gpt2.tiktoken: expected GPT-2's 50256 ranks, found {}", dir, spec.vocab.size() - 1));
    }
    return spec;
  }
  ByteLevelBpeSpec spec;
  spec.name = "gpt2";
  std::ifstream encoder_file(dir + "/encoder.json");
  nlohmann::json encoder = nlohmann::json::parse(encoder_file, nullptr, /*allow_exceptions=*/false);
  if (!encoder.is_object()) throw UsageError(fmt::format("{}/encoder.json is not a JSON object", dir));
  for (auto& [token, id] : encoder.items()) spec.vocab.emplace_back(token, id.get<std::uint32_t>());
  std::ifstream merges(dir + "/vocab.bpe");
  for (std::string line; std::getline(merges, line);) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const std::size_t space = line.find(' ');  // "first second": GPT-2 symbols never contain ' '
    if (space == std::string::npos) throw UsageError(fmt::format("{}/vocab.bpe: '{}' is not a merge", dir, line));
    spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  if (spec.vocab.size() != 50257 || spec.merges.size() != 50000) {
    throw UsageError(fmt::format("{}: expected 50257 tokens and 50000 merges, found {} and {}", dir, spec.vocab.size(),
                                 spec.merges.size()));
  }
  return spec;
}

namespace {

// A tokenizer.json is parsed within limits: GPT-NeoX-20B's is 2.1 MB and nests 5 levels, and a
// 256k-token vocabulary with its merges holds about a million values.
constexpr std::uintmax_t kMaxTokenizerBytes = 64ull << 20;
constexpr int kMaxTokenizerDepth = 32;
constexpr JsonBounds kTokenizerBounds{kMaxTokenizerDepth, std::size_t{1} << 21, std::size_t{1} << 23};

ByteLevelBpeSpec spec_from_tokenizer_json(const std::string& path);

}  // namespace

ByteLevelBpeSpec bpe_spec_from_tokenizer_json(const std::string& path) {
  // Wrong types anywhere (an id that is a string, a content that is a number) are the file's
  // fault: said with its name, as a usage error, never as a raw JSON exception.
  try {
    return spec_from_tokenizer_json(path);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(with_hint(fmt::format("{}: a value of the wrong type or shape ({})", path, e.what()),
                               "a tokenizer.json in the Hugging Face format: model.vocab {token: id}, model.merges, "
                               "added_tokens [{id, content}]"));
  }
}

namespace {

ByteLevelBpeSpec spec_from_tokenizer_json(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(fmt::format("the tokenizer file '{}' is a folder", path));
  // A device or a pipe (a link to /dev/zero) has no size to check: only a regular file is read.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
    throw UsageError(
        with_hint(fmt::format("the tokenizer file '{}' is not a regular file", path), "name a tokenizer.json file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read the tokenizer file '{}'", path));
  // Read to one byte past the limit, whatever the size said: the file may grow meanwhile.
  std::string text(kMaxTokenizerBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxTokenizerBytes) {
    throw UsageError(fmt::format("{}: more than the {} MiB a tokenizer.json may have", path, kMaxTokenizerBytes >> 20));
  }
  nlohmann::json file;
  const std::string why = json_parse_bounded(text, kTokenizerBounds, file);
  // Invalid JSON leaves `file` null, which the checks below call "not a JSON object".
  if (!why.empty() && why.rfind("is not valid JSON", 0) != 0) {
    throw UsageError(fmt::format("{}: {}: not a tokenizer.json", path, why));
  }
  auto fail = [&](const std::string& what, const std::string& hint) -> void {
    throw UsageError(with_hint(fmt::format("{}: {}", path, what), hint));
  };
  // An id as the file gives it, checked before it is narrowed (2^32 + 5 must not become 5).
  auto id_of = [&](const nlohmann::json& id, const std::string& where) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > kMaxTokenId) {
      fail(fmt::format("{} is not a token id from 0 to {}", where, kMaxTokenId), "ids are integers >= 0");
    }
    return static_cast<std::uint32_t>(id.get<std::uint64_t>());
  };
  const std::string supported =
      "tfw reads byte-level BPE tokenizers (GPT-2, GPT-NeoX-20B): model.type \"BPE\" with "
      "a ByteLevel pre-tokenizer";
  if (!file.is_object()) fail("not a JSON object (a tokenizer.json in the Hugging Face format)", supported);
  const nlohmann::json& model = file.contains("model") ? file["model"] : nlohmann::json();
  if (!model.is_object()) fail("has no \"model\" object", supported);
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") fail(fmt::format("model.type is \"{}\", not \"BPE\"", type), supported);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      fail(fmt::format("model.{} is set: not a byte-level BPE", key), supported);
    }
  }
  if (model.value("byte_fallback", false)) fail("model.byte_fallback is set: not a byte-level BPE", supported);
  if (!model.contains("vocab") || !model["vocab"].is_object() || model["vocab"].empty()) {
    fail("model.vocab is missing or empty", "a BPE tokenizer.json holds its vocabulary as model.vocab {token: id}");
  }
  if (!model.contains("merges") || !model["merges"].is_array() || model["merges"].empty()) {
    fail("model.merges is missing or empty", "a BPE tokenizer.json holds its merges as model.merges");
  }
  // The pre-tokenizer: ByteLevel (alone, or the only entry of a Sequence), with GPT-2's regex.
  nlohmann::json pre = file.contains("pre_tokenizer") ? file["pre_tokenizer"] : nlohmann::json();
  if (pre.is_object() && pre.value("type", std::string()) == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].size() == 1) {
    pre = pre["pretokenizers"][0];
  }
  if (!pre.is_object() || pre.value("type", std::string()) != "ByteLevel") {
    fail(fmt::format("the pre-tokenizer is {}, not ByteLevel",
                     pre.is_object() ? pre.value("type", std::string("?")) : "missing"),
         supported);
  }
  if (!pre.value("use_regex", true)) fail("pre_tokenizer.use_regex is false: not GPT-2's split", supported);
  ByteLevelBpeSpec spec;
  spec.name = fs::path(path).filename().string();
  spec.add_prefix_space = pre.value("add_prefix_space", false);
  // The normaliser: none, or NFC (GPT-NeoX-20B's).
  const nlohmann::json& normalizer = file.contains("normalizer") ? file["normalizer"] : nlohmann::json();
  if (normalizer.is_object()) {
    const std::string kind = normalizer.value("type", std::string("?"));
    if (kind != "NFC") fail(fmt::format("the normalizer {} is not supported", kind), "tfw supports none or NFC");
    spec.nfc = true;
  }
  for (const auto& [token, id] : model["vocab"].items()) {
    spec.vocab.emplace_back(token, id_of(id, fmt::format("model.vocab[\"{}\"]", token.substr(0, 64))));
  }
  std::size_t index = 0;
  for (const nlohmann::json& merge : model["merges"]) {
    ++index;
    if (merge.is_string()) {  // "first second" (tokenizers < 0.20)
      const std::string text = merge.get<std::string>();
      const std::size_t space = text.find(' ');
      if (space == std::string::npos) fail(fmt::format("the merge '{}' is not two symbols", text), "write \"a b\"");
      spec.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {  // ["a", "b"]
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      // Named by its place: the value itself may be huge or nested.
      fail(fmt::format("merge {} of model.merges is not two symbols", index), "write \"a b\" or [\"a\", \"b\"]");
    }
  }
  if (file.contains("added_tokens") && file["added_tokens"].is_array()) {
    for (const nlohmann::json& added : file["added_tokens"]) {
      if (!added.is_object() || !added.contains("id") || !added.contains("content") || !added["content"].is_string()) {
        fail("an added token lacks its id or its content text",
             "each added_tokens entry is {\"id\": N, \"content\": \"text\"}");
      }
      // An empty content matches everywhere and made encode loop forever.
      if (added["content"].get<std::string>().empty()) {
        fail("an added token has an empty content", "give each added token its text");
      }
      spec.added.emplace_back(added["content"].get<std::string>(), id_of(added["id"], "an added token's id"));
    }
  }
  return spec;
}

}  // namespace

std::unique_ptr<Tokenizer> gpt2_tokenizer_create() {
  return byte_level_bpe_create(bpe_spec_from_gpt2_files(find_data_dir()));
}

}  // namespace tfw
