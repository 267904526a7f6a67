// An experiment file's [units] (engine/config/experiment.h, docs/experiments.md): one unit per
// seed and entry, a lineage whole within its unit, every run in exactly one; and
// `tfw run --unit`'s selection (runner::batch_select_unit).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "engine/config/experiment.h"
#include "engine/core/error.h"
#include "runner/batch.h"
#include "tests/plugin_registry.h"

namespace tfw::runner {
namespace {

// A two-stage ladder and two baselines, two seeds; `units` (the file's [units] table) opens the file.
Experiment with_units(const std::string& units) {
  const std::string text = units + R"(
[experiment]
name = "u"
seeds = [0, 1]
[defaults]
data = { corpus = "kjv" }
train = { batch_size = 2, max_steps = 2 }
[runs.small]
family = "tokenformer"
model = { layers = 1, d = 8, heads = 1, n_attn = 4, n_ffn = 4, vocab = 256, seq_len = 8 }
[runs.grown]
parent = "small"
growth = { method = "pattention_grow" }
family = "tokenformer"
model = { layers = 1, d = 8, heads = 1, n_attn = 8, n_ffn = 8, vocab = 256, seq_len = 8 }
[runs.base-a]
family = "transformer"
model = { layers = 1, d = 8, heads = 1, d_ffn = 16, vocab = 256, seq_len = 8 }
[runs.base-b]
family = "transformer"
model = { layers = 1, d = 8, heads = 1, d_ffn = 32, vocab = 256, seq_len = 8 }
)";
  return experiment_parse(test::test_plugins(), toml::parse(text), "u.toml", ".");
}

// The message of the UsageError `body` throws; a test failure, and "", when it throws none.
std::string usage_error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

std::vector<std::string> names(const std::vector<const ExperimentRun*>& runs) {
  std::vector<std::string> out;
  for (const ExperimentRun* run : runs) out.push_back(run->name);
  return out;
}

TEST(Units, OneUnitASeedAndEntryEachWithTheAncestorsItNeeds) {
  const Experiment e = with_units("[units]\nladder = \"grown\"\nbaselines = \"base-*\"\n");
  ASSERT_EQ(e.units.size(), 4u);
  // Seed by seed, each seed's units in file order.
  EXPECT_EQ(e.units[0].name, "ladder-s0");
  EXPECT_EQ(e.units[1].name, "baselines-s0");
  EXPECT_EQ(e.units[2].name, "ladder-s1");
  EXPECT_EQ(e.units[3].name, "baselines-s1");
  EXPECT_EQ(e.units[2].seed, 1);
  EXPECT_EQ(e.units[2].pattern, "grown");
  EXPECT_EQ(e.units[0].runs, (std::vector<std::string>{"small-s0", "grown-s0"}));
  EXPECT_EQ(e.units[3].runs, (std::vector<std::string>{"base-a-s1", "base-b-s1"}));
  EXPECT_EQ(names(batch_select_unit(e, "ladder-s1")), (std::vector<std::string>{"small-s1", "grown-s1"}));
  EXPECT_EQ(names(batch_select_unit(e, "baselines-s0")), (std::vector<std::string>{"base-a-s0", "base-b-s0"}));
  const std::string unknown = usage_error_of([&] { batch_select_unit(e, "ladder"); });
  EXPECT_NE(unknown.find("has no unit 'ladder'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("ladder-s0, baselines-s0, ladder-s1, baselines-s1"), std::string::npos) << unknown;
}

TEST(Units, AFileWithoutUnitsHasNoneAndSaysSoWhenOneIsAskedFor) {
  const Experiment e = with_units("");
  EXPECT_TRUE(e.units.empty());
  const std::string message = usage_error_of([&] { batch_select_unit(e, "x-s0"); });
  EXPECT_NE(message.find("no [units] table"), std::string::npos) << message;
}

TEST(Units, ARunInTwoUnitsInNoneOrAPatternThatMatchesNothingIsRefused) {
  // The parent of the ladder is also named by another unit: the lineage would be split.
  std::string message =
      usage_error_of([] { with_units("[units]\nladder = \"grown\"\nfirst = \"small\"\nb = \"base-*\"\n"); });
  EXPECT_NE(message.find("run small-s0 is in two units, ladder-s0 and first-s0"), std::string::npos) << message;
  message = usage_error_of([] { with_units("[units]\nladder = \"grown\"\nb = \"base-a\"\n"); });
  EXPECT_NE(message.find("run base-b-s0 is in no unit"), std::string::npos) << message;
  message = usage_error_of([] { with_units("[units]\nladder = \"grown\"\nb = \"base-*\"\nc = \"nothing*\"\n"); });
  EXPECT_NE(message.find("units.c: 'nothing*' matches no run"), std::string::npos) << message;
  message = usage_error_of([] { with_units("[units]\nladder = 3\n"); });
  EXPECT_NE(message.find("units.ladder: expected a glob over run names"), std::string::npos) << message;
  message = usage_error_of([] { with_units("units = \"all\"\n"); });
  EXPECT_NE(message.find("units: expected a table"), std::string::npos) << message;
}

}  // namespace
}  // namespace tfw::runner
