// Runs that differ only in seed are one group (the GUI's band, `tfw runs list --group`); where a
// run started is part of what it is: a grown run never groups with a run of the same config
// trained from scratch.
#include <gtest/gtest.h>

#include "storage/store.h"
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
