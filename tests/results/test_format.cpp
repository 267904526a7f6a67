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
  EXPECT_EQ(tfw::toml_value_as_written("128"), "128");                  // an integer stays
  EXPECT_EQ(tfw::toml_value_as_written("'l2_gelu'"), "'l2_gelu'");      // a string stays
  EXPECT_EQ(tfw::toml_value_as_written("[ 0.5, 0.25 ]"), "[ 0.5, 0.25 ]");  // an array stays
  EXPECT_EQ(tfw::toml_as_written("[train]\nlr = 0.0030000000000000001\nname = 'a = 0.10000000000000001'\n"),
            "[train]\nlr = 0.003\nname = 'a = 0.10000000000000001'\n");
}

TEST(Format, TableColumnsAreAsWideAsTheirWidestCell) {
  const std::string table = tfw::text_table({{"run", "tokens/s"}, {"a-very-long-run-name", "12"}, {"b", "3,456"}},
                                            {false, true});
  EXPECT_EQ(table,
            "run                   tokens/s\n"
            "a-very-long-run-name        12\n"
            "b                        3,456\n");
}
