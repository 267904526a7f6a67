// What the store must hold after tests/data/tiny-experiment.toml ran (two Tokenformer
// stages, the second grown from the first, and a Transformer baseline), whichever way it
// was executed: `tfw run`, the runner's batch in-process, or the service. Shared by the
// runner's and the service's tests so that both hold the same expectations.
#pragma once

#include <gtest/gtest.h>

#include "storage/store.h"

namespace tfw::test {

inline void expect_tiny_lineage(Store& store, const std::string& experiment = "tiny") {
  std::optional<RunRecord> small = store.run_in_experiment(experiment, "small");
  std::optional<RunRecord> grown = store.run_in_experiment(experiment, "grown");
  std::optional<RunRecord> baseline = store.run_in_experiment(experiment, "baseline");
  ASSERT_TRUE(small && grown && baseline);
  for (const RunRecord* run : {&*small, &*grown, &*baseline}) {
    EXPECT_EQ(run->status, RunStatus::finished) << run->name;
    EXPECT_GT(run->flops, 0) << run->name;
    EXPECT_EQ(run->cumulative_flops, run->inherited_flops + run->flops) << run->name;
  }
  // Roots: no parent, stage 0, nothing inherited.
  for (const RunRecord* root : {&*small, &*baseline}) {
    EXPECT_EQ(root->parent, 0) << root->name;
    EXPECT_EQ(root->stage, 0) << root->name;
    EXPECT_EQ(root->inherited_flops, 0) << root->name;
    EXPECT_EQ(root->growth_method, "") << root->name;
  }
  // The stage: a child of small, grown by pattention_grow from small's final checkpoint, so
  // it inherits exactly small's training FLOPs (20 steps each, the same tokens per step).
  EXPECT_EQ(grown->parent, small->id);
  EXPECT_EQ(grown->stage, 1);
  EXPECT_EQ(grown->growth_method, "pattention_grow");
  EXPECT_EQ(grown->inherited_flops, small->flops);
  EXPECT_EQ(grown->cumulative_flops, small->flops + grown->flops);
  EXPECT_GT(grown->parameters, small->parameters);
  EXPECT_EQ(small->tokens, grown->tokens);
  EXPECT_EQ(baseline->tokens, 2 * small->tokens);  // 40 steps against 20
  const std::vector<RunRecord> lineage = store.lineage(grown->id);
  ASSERT_EQ(lineage.size(), 2u);
  EXPECT_EQ(lineage.front().id, small->id);
  EXPECT_TRUE(store.run_children(small->id).size() == 1 && store.run_children(small->id).front().id == grown->id);
}

}  // namespace tfw::test
