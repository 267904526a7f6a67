// The CLI's and GUI's number and table formatting (workbench/common/format.h), by hand.
#include <gtest/gtest.h>

#include "workbench/common/format.h"

TEST(Format, DurationsGrowIntoDaysAndYears) {
  EXPECT_EQ(tfw::duration_text(75), "1m15s");
  EXPECT_EQ(tfw::duration_text(3725), "1h02m");
  EXPECT_EQ(tfw::duration_text(47 * 3600 + 59 * 60), "47h59m");
  EXPECT_EQ(tfw::duration_text(3 * 86400 + 4 * 3600 + 5), "3d04h");
  EXPECT_EQ(tfw::duration_text(2.4 * 365.25 * 86400), "2.4 years");
  // The paper's 1.4B Transformer on 2 cores: 3.08e21 FLOPs at 35% of 5.1e10 FLOP/s.
  EXPECT_EQ(tfw::duration_text(3.082e21 / (0.35 * 5.098e10)), "5,473 years");
  EXPECT_EQ(tfw::duration_text(-1), "?");
}

TEST(Format, FloatsAsWritten) {
  EXPECT_EQ(tfw::float_text(0.003), "0.003");
  EXPECT_EQ(tfw::float_text(1.0), "1.0");
  EXPECT_EQ(tfw::float_text(1e-5), "1e-05");
  EXPECT_EQ(tfw::toml_value_as_written("0.0030000000000000001"), "0.003");
  EXPECT_EQ(tfw::toml_value_as_written("0.90000000000000002"), "0.9");
  EXPECT_EQ(tfw::toml_value_as_written("1.0000000000000001e-05"), "1e-05");
  EXPECT_EQ(tfw::toml_value_as_written("128"), "128");                      // an integer stays
  EXPECT_EQ(tfw::toml_value_as_written("'l2_gelu'"), "'l2_gelu'");          // a string stays
  EXPECT_EQ(tfw::toml_value_as_written("[ 0.5, 0.25 ]"), "[ 0.5, 0.25 ]");  // an array stays
  EXPECT_EQ(tfw::toml_as_written("[train]\nlr = 0.0030000000000000001\nname = 'a = 0.10000000000000001'\n"),
            "[train]\nlr = 0.003\nname = 'a = 0.10000000000000001'\n");
}

TEST(Format, ProgressOfARunningRun) {
  // 200 steps; points at step 10 (wall 5 s) and step 50 (wall 25 s): 40 steps in 20 s, so the
  // 150 left take 75 s.
  const tfw::RunBudget steps{200, 0, 0};
  const tfw::RunPoint first{10, 2560, 1e9, 5}, latest{50, 12800, 5e9, 25};
  const tfw::RunProgress p = tfw::run_progress(steps, first, latest);
  EXPECT_DOUBLE_EQ(p.fraction, 0.25);
  EXPECT_DOUBLE_EQ(p.eta_seconds, 75);
  EXPECT_EQ(tfw::progress_text(steps, first, latest), "step 50 of 200 (25%), 12.8K tokens, 1m15s left");
  // A token budget of 51,200: 5% at the first point, 25% at the latest, 20 s apart: 0.75 / 0.2 × 20 s = 75 s.
  const tfw::RunBudget tokens{0, 51200, 0};
  EXPECT_DOUBLE_EQ(tfw::run_progress(tokens, first, latest).fraction, 0.25);
  EXPECT_DOUBLE_EQ(tfw::run_progress(tokens, first, latest).eta_seconds, 75);
  EXPECT_EQ(tfw::progress_text(tokens, first, latest), "step 50 (25%), 12.8K tokens of 51.2K, 1m15s left");
  // A FLOPs budget of 2e10: 25% again.
  EXPECT_EQ(tfw::progress_text({0, 0, 2e10}, first, latest),
            "step 50 (25%), 12.8K tokens, 5e+09 of 2e+10 FLOPs, 1m15s left");
  // One point: no rate, so no time left; no budget: no share either.
  EXPECT_EQ(tfw::run_progress(steps, latest, latest).eta_seconds, -1);
  EXPECT_EQ(tfw::progress_text({}, first, latest), "step 50, 12.8K tokens");
  // Past the budget (a run extended by hand): capped at 100%, nothing left.
  EXPECT_DOUBLE_EQ(tfw::run_progress({40, 0, 0}, first, latest).fraction, 1.0);
}

TEST(Format, TableColumnsAreAsWideAsTheirWidestCell) {
  const std::string table =
      tfw::text_table({{"run", "tokens/s"}, {"a-very-long-run-name", "12"}, {"b", "3,456"}}, {false, true});
  EXPECT_EQ(table,
            "run                   tokens/s\n"
            "a-very-long-run-name        12\n"
            "b                        3,456\n");
}

// One unit per character: the lines the GUI's wrapped text draws.
TEST(Format, TextWrapsAtSpacesOnlyNeverInsideAWord) {
  const auto chars = [](const std::string& s) { return static_cast<double>(s.size()); };
  using Lines = std::vector<std::string>;
  // "grown with net2net" (18) + " " + 24 = 43 > 20: the options go to a line of their own, whole.
  EXPECT_EQ(tfw::wrap_at_spaces("grown with net2net {\"n_attn\":32,\"n_ffn\":48}", 20, chars),
            (Lines{"grown with net2net", "{\"n_attn\":32,\"n_ffn\":48}"}));
  // Exactly the width fits; one more does not.
  EXPECT_EQ(tfw::wrap_at_spaces("aaaa bbbb cccc", 9, chars), (Lines{"aaaa bbbb", "cccc"}));
  EXPECT_EQ(tfw::wrap_at_spaces("aaaa bbbb cccc", 8, chars), (Lines{"aaaa", "bbbb", "cccc"}));
  // A path wider than the line stays whole; line breaks are kept; runs of spaces become one.
  EXPECT_EQ(tfw::wrap_at_spaces("at /a/very/long/run/folder/path now", 10, chars),
            (Lines{"at", "/a/very/long/run/folder/path", "now"}));
  EXPECT_EQ(tfw::wrap_at_spaces("one\ntwo  three", 40, chars), (Lines{"one", "two three"}));
  EXPECT_EQ(tfw::wrap_at_spaces("", 40, chars), Lines{});
  // An error's hint keeps its indentation; a final line break adds no line; a blank line stays.
  EXPECT_EQ(tfw::wrap_at_spaces("no store\n  hint: run tfw train first\n", 14, chars),
            (Lines{"no store", "  hint: run", "tfw train", "first"}));
  EXPECT_EQ(tfw::wrap_at_spaces("a\n\nb", 40, chars), (Lines{"a", "", "b"}));
}
