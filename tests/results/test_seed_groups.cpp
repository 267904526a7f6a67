// Runs that differ only in seed are one group (the GUI's band, `tfw runs list --group`); where a
// run started is part of what it is: a grown run never groups with a run of the same config
// trained from scratch.
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "storage/store.h"
#include "workbench/results/figures.h"
#include "workbench/results/results.h"

namespace tfw {
namespace {

RunRecord record(std::int64_t id, const std::string& name, std::int64_t seed, std::int64_t n_attn,
                 std::int64_t parent = 0) {
  RunRecord r;
  r.id = id;
  r.experiment = "e";
  r.name = name;
  r.seed = seed;
  r.config = "name = \"" + name + "\"\nfamily = \"tokenformer\"\n[model]\nn_attn = " + std::to_string(n_attn) +
             "\n[train]\nseed = " + std::to_string(seed) + "\n";
  r.parent = parent;
  if (parent != 0) r.growth_method = "pattention_grow";
  return r;
}

TEST(SeedGroups, AGrownRunNeverGroupsWithTheSameConfigFromScratch) {
  // small-s0/s1 (ids 1, 2) grown into grown-s0/s1 (3, 4); scratch-s0/s1 (5, 6) have grown's config.
  const std::vector<RunRecord> runs = {record(1, "small-s0", 0, 16),    record(2, "small-s1", 1, 16),
                                       record(3, "grown-s0", 0, 32, 1), record(4, "grown-s1", 1, 32, 2),
                                       record(5, "scratch-s0", 0, 32),  record(6, "scratch-s1", 1, 32)};
  const std::vector<results::SeedGroup> groups = results::group_by_seed(runs);
  ASSERT_EQ(groups.size(), 3u);
  const std::vector<std::string> labels = {groups[0].label, groups[1].label, groups[2].label};
  EXPECT_EQ(labels, (std::vector<std::string>{"small", "grown", "scratch"}));
  for (const results::SeedGroup& group : groups) EXPECT_EQ(group.runs.size(), 2u) << group.label;
  EXPECT_EQ(groups[1].runs[0]->id, 3);  // the two seeds of the grown stage, each from its own parent
  EXPECT_EQ(groups[1].runs[1]->id, 4);
  // Grown by another method: a group of its own.
  std::vector<RunRecord> other = runs;
  other[3].growth_method = "net2net";
  EXPECT_EQ(results::group_by_seed(other).size(), 4u);
  // The parents not among the runs: the grown seeds still group, apart from scratch.
  const std::vector<RunRecord> orphans = {runs[2], runs[3], runs[4], runs[5]};
  EXPECT_EQ(results::group_by_seed(orphans).size(), 2u);
}

}  // namespace
}  // namespace tfw

namespace tfw {
namespace {

// The shipped e1-mini figure (rebuilt byte for byte from its data by tests/results_rebuild.sh): a
// Tokenformer grown twice (tokenformer-s1 -> s2 -> s3, three seeds) beside eight groups trained
// from scratch. The lineage is one colour; every other group has a colour (and dash) of its own.
TEST(LineageColours, ATwoGrowthStudysFigureDrawsItsLineageInOneColour) {
  std::ifstream in(TFW_SOURCE_DIR "/docs/results/figures/e1-mini/loss_vs_flops.svg");
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(svg.empty());
  const std::regex path(
      R"re(<path class="run" data-run="([^"]+)-s[0-9]+" fill="none" stroke="(#[0-9a-f]{6})"([^>]*)>)re");
  std::map<std::string, std::set<std::string>> looks;  // group -> stroke and dash
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator(); ++it) {
    const std::string dashed = (*it)[3].str().find("stroke-dasharray") != std::string::npos ? " dashed" : "";
    looks[(*it)[1].str()].insert((*it)[2].str() + dashed);
  }
  ASSERT_EQ(looks.size(), 11u);
  for (const auto& [group, look] : looks) EXPECT_EQ(look.size(), 1u) << group << ": one look for its seeds";
  const std::string lineage = *looks["tokenformer-s1"].begin();
  EXPECT_EQ(*looks["tokenformer-s2"].begin(), lineage);
  EXPECT_EQ(*looks["tokenformer-s3"].begin(), lineage);
  std::set<std::string> others;
  for (const auto& [group, look] : looks) {
    if (group == "tokenformer-s1" || group == "tokenformer-s2" || group == "tokenformer-s3") continue;
    EXPECT_NE(*look.begin(), lineage) << group;
    others.insert(*look.begin());
  }
  EXPECT_EQ(others.size(), 8u);  // the eight groups from scratch, told apart
}

}  // namespace
}  // namespace tfw

namespace tfw {
namespace {

// The colour rule by hand: a ladder is one colour; a parent grown two ways gives each branch
// its own; a group drawn seed by seed takes a colour a run, and its child does not continue it.
TEST(LineageColours, TheRuleByHand) {
  using results::lineage_colour_indices;
  EXPECT_EQ(lineage_colour_indices({-1, 0, 1, -1}, {1, 1, 1, 1}), (std::vector<std::size_t>{0, 0, 0, 1}));
  EXPECT_EQ(lineage_colour_indices({-1, 0, 0}, {1, 1, 1}), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(lineage_colour_indices({-1, 0, -1}, {3, 1, 1}), (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_EQ(lineage_colour_indices({1, -1}, {1, 1}), (std::vector<std::size_t>{0, 1}));  // a parent after its child
}

}  // namespace
}  // namespace tfw
