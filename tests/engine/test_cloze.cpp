// Cloze passages (engine/data/cloze.h) on a hand-made text, where every candidate's fate is
// known: the rule (a sentence-final word of 4+ letters, named earlier in the context the
// window leaves), the context cut, and no overlap between passages.
#include <string>

#include <gtest/gtest.h>

#include "engine/data/cloze.h"
#include "engine/data/tokenizer.h"

namespace test_cloze {

const std::string kText =
    "Moses spoke to Aaron. Then Aaron went up to Moses. And Moses said unto Aaron, come hither Aaron.";

std::string text_of(const std::vector<std::uint32_t>& ids) { return tfw::tokenizer_create("byte")->decode(ids); }

TEST(Cloze, AWideWindowFindsTheWordNamedEarlierAndSkipsWhatWouldOverlap) {
  const auto byte = tfw::tokenizer_create("byte");
  // Window 64: " Moses" is 6 tokens, leaving 59 of context, more than the text before it.
  //  - the first "Aaron." has no earlier Aaron: skipped;
  //  - "Moses." at byte 44 is named at the start: kept, with all 43 bytes before its space;
  //  - the last "Aaron." would need context from before byte 49, where the kept passage ends.
  const std::vector<tfw::ClozePassage> passages = tfw::cloze_passages(kText, *byte, 10, 64);
  ASSERT_EQ(passages.size(), 1u);
  EXPECT_EQ(passages[0].offset, 44u);
  EXPECT_EQ(passages[0].word, "Moses");
  EXPECT_EQ(text_of(passages[0].target), " Moses");
  EXPECT_EQ(text_of(passages[0].context), "Moses spoke to Aaron. Then Aaron went up to");
}

TEST(Cloze, ANarrowWindowCutsTheContextAndKeepsOnlyWhatItStillNames) {
  const auto byte = tfw::tokenizer_create("byte");
  // Window 32 leaves 27 bytes beside a 6-byte target: "Moses." at 44 sees only
  // "aron. Then Aaron went up to" (no Moses), the last "Aaron." sees "aid unto Aaron, come
  // hither" (its Aaron): kept.
  const std::vector<tfw::ClozePassage> passages = tfw::cloze_passages(kText, *byte, 10, 32);
  ASSERT_EQ(passages.size(), 1u);
  EXPECT_EQ(passages[0].offset, 90u);
  EXPECT_EQ(passages[0].word, "Aaron");
  EXPECT_EQ(text_of(passages[0].context), "aid unto Aaron, come hither");
  EXPECT_EQ(passages[0].context.size(), 27u);
  // At most `count` passages.
  EXPECT_TRUE(tfw::cloze_passages(kText, *byte, 0, 64).empty());
}

}  // namespace test_cloze
