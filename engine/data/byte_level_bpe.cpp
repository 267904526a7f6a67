// Byte-level BPE's encoder and decoder (engine/data/bpe.h), written from the algorithm
// (Radford et al. 2019; the reference encoder in the npm package gpt-3-encoder): bytes map to
// printable code points, text is pre-split by GPT-2's pattern, each piece is merged by rank and
// looked up in the vocabulary. The specs it runs (GPT-2's files, a tokenizer.json) are read in
// gpt2_tokenizer.cpp.
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <climits>
#include <unordered_map>

#include <fmt/format.h>

#include "engine/data/bpe.h"
#include "engine/data/bpe_byte_map.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"

namespace tfw {

namespace {

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
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER: return CharClass::letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER: return CharClass::number;
    default: return CharClass::other;
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
  auto emit = [&](std::size_t from, std::size_t to) {
    pieces.push_back(text.substr(offsets[from], offsets[to] - offsets[from]));
  };
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
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        length = 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        length = 3;
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

}  // namespace

// Byte-level BPE's byte map: printable bytes map to themselves; the others to 256, 257, ... in
// byte order; each as UTF-8.
std::array<std::string, 256> byte_symbols() {
  std::array<std::string, 256> symbols;
  int shifted = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const std::uint32_t cp = printable ? static_cast<std::uint32_t>(b) : 256u + static_cast<std::uint32_t>(shifted++);
    append_utf8(symbols[b], cp);
  }
  return symbols;
}

namespace {

class ByteLevelBpe : public Tokenizer {
 public:
  explicit ByteLevelBpe(ByteLevelBpeSpec spec) : spec_(std::move(spec)) {
    byte_to_symbol_ = byte_symbols();
    for (int b = 0; b < 256; ++b) {
      symbol_to_byte_[next_code_point(byte_to_symbol_[b], 0).value] = static_cast<unsigned char>(b);
    }
    // Ids index a table: a hostile file's id of 4294967295 made `id + 1` wrap to 0 and the
    // write below land outside it. The table is bounded before anything is sized.
    auto check_id = [&](std::uint32_t id) {
      if (id <= kMaxTokenId) return;
      throw UsageError(
          with_hint(fmt::format("tokenizer {}: the token id {} is above the largest id tfw accepts ({})", spec_.name,
                                id, kMaxTokenId),
                    "a tokenizer's ids run from 0 to its vocabulary size - 1; is this a real model's tokenizer?"));
    };
    for (const auto& [token, id] : spec_.vocab) check_id(id);
    for (const auto& [token, id] : spec_.added) {
      check_id(id);
      if (token.empty()) throw UsageError(fmt::format("tokenizer {}: an added token has an empty content", spec_.name));
    }
    for (const auto& [token, id] : spec_.vocab) {
      ids_.emplace(token, id);
      if (tokens_.size() <= id) tokens_.resize(id + 1);
      tokens_[id] = token;
    }
    for (const auto& [token, id] : spec_.added) {
      if (tokens_.size() <= id) tokens_.resize(id + 1);
      added_text_[id] = token;
    }
    // Longest first, so that a special token that contains another wins.
    std::sort(spec_.added.begin(), spec_.added.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (std::size_t rank = 0; rank < spec_.merges.size(); ++rank) {
      ranks_.emplace(spec_.merges[rank].first + " " + spec_.merges[rank].second, static_cast<int>(rank));
    }
    vocab_size_ = static_cast<std::uint32_t>(tokens_.size());
    if (spec_.nfc) {
      UErrorCode status = U_ZERO_ERROR;
      nfc_ = icu::Normalizer2::getNFCInstance(status);
      if (U_FAILURE(status)) throw Error("the NFC normaliser of ICU is unavailable");
    }
  }

  std::string name() const override { return spec_.name; }
  std::uint32_t vocab_size() const override { return vocab_size_; }

  void encode(std::string_view text, std::vector<std::uint32_t>& out) const override {
    // Added (special) tokens are matched in the raw text first; the text between them is
    // normalised, pre-split and merged.
    std::size_t from = 0;
    while (from <= text.size()) {
      std::size_t best = std::string_view::npos;
      const std::pair<std::string, std::uint32_t>* token = nullptr;
      for (const auto& added : spec_.added) {
        const std::size_t at = text.find(added.first, from);
        if (at < best) {
          best = at;
          token = &added;
        }
      }
      encode_plain(text.substr(from, best == std::string_view::npos ? std::string_view::npos : best - from), out);
      if (token == nullptr) break;
      out.push_back(token->second);
      from = best + token->first.size();
    }
  }

  std::string decode(const std::vector<std::uint32_t>& ids) const override {
    std::string bytes, symbols;
    auto flush = [&] {
      for (std::size_t i = 0; i < symbols.size();) {
        CodePoint cp = next_code_point(symbols, i);
        const auto found = symbol_to_byte_.find(cp.value);
        if (found == symbol_to_byte_.end())
          throw UsageError(fmt::format("{}: a token holds a symbol outside the byte map", spec_.name));
        bytes.push_back(static_cast<char>(found->second));
        i += cp.length;
      }
      symbols.clear();
    };
    for (std::uint32_t id : ids) {
      if (auto added = added_text_.find(id); added != added_text_.end()) {
        flush();
        bytes += added->second;
        continue;
      }
      if (id >= tokens_.size() || tokens_[id].empty()) {
        throw UsageError(fmt::format("{} tokenizer: id {} is out of range", spec_.name, id));
      }
      symbols += tokens_[id];
    }
    flush();
    return bytes;
  }

 private:
  void encode_plain(std::string_view raw, std::vector<std::uint32_t>& out) const {
    if (raw.empty()) return;
    std::string normalised;
    if (nfc_ != nullptr) {
      UErrorCode status = U_ZERO_ERROR;
      const icu::UnicodeString u =
          icu::UnicodeString::fromUTF8(icu::StringPiece(raw.data(), static_cast<std::int32_t>(raw.size())));
      if (!nfc_->isNormalized(u, status)) {
        status = U_ZERO_ERROR;
        nfc_->normalize(u, status).toUTF8String(normalised);
        raw = normalised;
      }
    }
    std::string prefixed;
    if (spec_.add_prefix_space && raw.front() != ' ') {
      prefixed = " " + std::string(raw);
      raw = prefixed;
    }
    for (std::string_view piece : pre_split(raw)) {
      auto cached = cache_.find(std::string(piece));
      if (cached == cache_.end()) cached = cache_.emplace(std::string(piece), bpe(piece)).first;
      out.insert(out.end(), cached->second.begin(), cached->second.end());
    }
    if (cache_.size() > 500000) cache_.clear();
  }

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
    for (const std::string& symbol : word) {
      const auto found = ids_.find(symbol);
      if (found == ids_.end()) {
        throw UsageError(fmt::format("{}: the symbol '{}' has no id (the vocabulary lacks a merge result or a byte)",
                                     spec_.name, symbol));
      }
      ids.push_back(found->second);
    }
    return ids;
  }

  ByteLevelBpeSpec spec_;
  std::uint32_t vocab_size_ = 0;
  const icu::Normalizer2* nfc_ = nullptr;
  std::array<std::string, 256> byte_to_symbol_;
  std::unordered_map<std::uint32_t, unsigned char> symbol_to_byte_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::uint32_t, std::string> added_text_;
  std::unordered_map<std::string, int> ranks_;
  mutable std::unordered_map<std::string, std::vector<std::uint32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> byte_level_bpe_create(ByteLevelBpeSpec spec) {
  return std::make_unique<ByteLevelBpe>(std::move(spec));
}

}  // namespace tfw
