// A run's final metrics are typed once when the store reads the row (storage/final_metrics.h),
// and keep the stored bytes.
#include <cmath>

#include <gtest/gtest.h>

#include "storage/final_metrics.h"
#include "storage/store.h"
#include "tests/scratch.h"

namespace tfw {
namespace {

using Kind = FinalValue::Kind;

TEST(FinalMetrics, EachValueKeepsItsKindAndTheTextItsBytes) {
  const std::string text = R"({"val_loss": 3.25, "examples": 4096, "contended": false, "other_cpu_share": 0.125,)"
                           R"( "note": "ok", "bits": [1, 2.5e-7], "big": 18446744073709551615, "neg": -3})";
  const FinalMetrics m = FinalMetrics::from_text(text);
  EXPECT_EQ(m.text(), text);  // verbatim: spaces and key order as stored
  ASSERT_EQ(m.entries().size(), 8u);
  // Read in key order.
  std::vector<std::string> keys;
  for (const auto& [key, value] : m.entries()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"big", "bits", "contended", "examples", "neg", "note", "other_cpu_share",
                                            "val_loss"}));
  EXPECT_EQ(m.find("val_loss")->kind, Kind::number);
  EXPECT_EQ(*m.number("val_loss"), 3.25);
  EXPECT_EQ(m.find("examples")->kind, Kind::integer);
  EXPECT_EQ(m.find("examples")->integer, 4096);
  EXPECT_EQ(*m.number("examples"), 4096.0);
  EXPECT_EQ(m.find("neg")->integer, -3);
  // Past int64: a number only, never a wrapped integer.
  EXPECT_EQ(m.find("big")->kind, Kind::number);
  EXPECT_EQ(*m.number("big"), 18446744073709551615.0);
  // A boolean stays a boolean: a bundle's "contended": false is not 0.
  EXPECT_EQ(m.find("contended")->kind, Kind::flag);
  EXPECT_FALSE(m.flag("contended"));
  EXPECT_FALSE(m.number("contended").has_value());
  EXPECT_EQ(m.find("note")->kind, Kind::text);
  EXPECT_EQ(m.find("note")->text, "ok");
  EXPECT_EQ(m.find("bits")->kind, Kind::other);
  EXPECT_EQ(m.find("bits")->text, "[1,2.5e-07]");
  EXPECT_FALSE(m.number("note").has_value());
  EXPECT_EQ(m.find("absent"), nullptr);
  EXPECT_TRUE(std::isnan(m.number_or_nan("absent")));
  EXPECT_TRUE(FinalMetrics::from_text(R"({"contended": true})").flag("contended"));
}

TEST(FinalMetrics, TextThatIsNotAnObjectHasNoValuesAndKeepsItsBytes) {
  for (const std::string text : {"not json", "[1, 2]", "3", "{\"a\": 1", "null"}) {
    const FinalMetrics m = FinalMetrics::from_text(text);
    EXPECT_EQ(m.text(), text);
    EXPECT_TRUE(m.empty()) << text;
    EXPECT_FALSE(m.number("a").has_value()) << text;
  }
  EXPECT_EQ(FinalMetrics().text(), "{}");
  EXPECT_EQ(FinalMetrics::from_text("").text(), "{}");
  EXPECT_EQ(FinalMetrics::from_text("{\"a\":1}"), FinalMetrics::from_text("{\"a\":1}"));
  EXPECT_NE(FinalMetrics::from_text("{\"a\":1}"), FinalMetrics::from_text("{\"a\": 1}"));
}

TEST(FinalMetrics, TheStoreReadsThemTyped) {
  auto store = Store::open(test::fresh_store("final-metrics"));
  RunRecord run;
  run.name = "a";
  run.family = "tokenformer";
  run.config = "[model]\n";
  const std::int64_t id = store->run_create(run);
  EXPECT_EQ(store->run_get(id)->final_metrics.text(), "{}");
  const std::string text = R"({"val_loss":2.5,"tokens_per_second":1234.5,"contended":true,"examples":7})";
  store->run_finish(id, RunStatus::finished, text);
  const RunRecord read = *store->run_get(id);
  EXPECT_EQ(read.final_metrics.text(), text);
  EXPECT_EQ(*read.final_metrics.number("val_loss"), 2.5);
  EXPECT_EQ(*read.final_metrics.number("tokens_per_second"), 1234.5);
  EXPECT_EQ(read.final_metrics.find("examples")->integer, 7);
  EXPECT_TRUE(read.final_metrics.flag("contended"));
  // A copy inserted as it was read (a bundle's import) stores the same bytes.
  RunRecord copy = read;
  copy.name = "b";
  std::int64_t other = 0;
  store->transaction([&] { other = store->run_insert(copy); });
  EXPECT_EQ(store->run_get(other)->final_metrics.text(), text);
}

}  // namespace
}  // namespace tfw
