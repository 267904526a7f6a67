// See cloze.h.
#include "engine/data/cloze.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "engine/data/tokenizer.h"

namespace tfw {

namespace {

bool letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The words of `text`, lowercased.
std::set<std::string> words_of(const std::string& text) {
  std::set<std::string> words;
  for (std::size_t i = 0; i < text.size();) {
    if (!letter(text[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && letter(text[j])) ++j;
    words.insert(lower(text.substr(i, j - i)));
    i = j;
  }
  return words;
}

}  // namespace

std::vector<ClozePassage> cloze_passages(const std::string& text, const Tokenizer& tokenizer, std::size_t count,
                                         std::size_t window) {
  std::vector<ClozePassage> passages;
  std::uint64_t free_from = 0;  // a context may start here or later
  for (std::size_t i = 0; i < text.size() && passages.size() < count;) {
    if (!letter(text[i])) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && letter(text[end])) ++end;
    const std::size_t start = i;
    i = end;
    const bool sentence_end = end < text.size() && (text[end] == '.' || text[end] == '!' || text[end] == '?');
    if (end - start < 4 || !sentence_end || start == 0 || text[start - 1] != ' ') continue;
    ClozePassage passage;
    passage.offset = start;
    passage.word = text.substr(start, end - start);
    tokenizer.encode(" " + passage.word, passage.target);
    if (passage.target.size() >= window) continue;
    const std::size_t context_tokens = window - passage.target.size() + 1;
    // Encode a slice long enough for the context (16 bytes a token covers any tokenizer here),
    // then keep its last tokens: the slice's cut first token is dropped with the rest.
    const std::size_t space = start - 1;
    const std::size_t slice = std::min<std::size_t>(space, context_tokens * 16);
    std::vector<std::uint32_t> tokens;
    tokenizer.encode(std::string_view(text).substr(space - slice, slice), tokens);
    if (tokens.size() > context_tokens)
      tokens.erase(tokens.begin(), tokens.end() - static_cast<std::ptrdiff_t>(context_tokens));
    const std::string context = tokenizer.decode(tokens);
    if (context.size() > space || space - context.size() < free_from) continue;  // overlaps the previous passage
    if (!words_of(context).count(lower(passage.word))) continue;                 // not named before
    passage.context = std::move(tokens);
    free_from = end;
    passages.push_back(std::move(passage));
  }
  return passages;
}

}  // namespace tfw
