// Cloze passages in the LAMBADA style, built from held-out text (`tfw eval --cloze`,
// docs/cli.md): each passage ends in a word whose prediction needs its context. Torch-free.
//
// The rule, applied to the text in order:
// 1. A word is a maximal run of ASCII letters. A target is a word of at least 4 letters
//    that ends a sentence (the next character is '.', '!' or '?') and is preceded by a space.
// 2. Its target string is " " + word; its context is the text before that space, cut to the
//    last `context_tokens` tokens (what the model's window leaves beside the target).
// 3. It is kept only when the word (compared case-insensitively) occurs as a word in that
//    context: the passage names it before asking for it.
// 4. Passages do not overlap: a target's context must start after the previous kept
//    target's end. The first `count` passages are taken.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfw {

class Tokenizer;

struct ClozePassage {
  std::uint64_t offset = 0;            // byte offset of the target word in the text
  std::string word;                    // the target word
  std::vector<std::uint32_t> context;  // context tokens (at most context_tokens)
  std::vector<std::uint32_t> target;   // the tokens of " " + word
};

// `window` is the model's T: the model reads the context and all but the last target token,
// so a target of k tokens leaves T - k + 1 tokens of context.
std::vector<ClozePassage> cloze_passages(const std::string& text, const Tokenizer& tokenizer, std::size_t count,
                                         std::size_t window);

}  // namespace tfw
