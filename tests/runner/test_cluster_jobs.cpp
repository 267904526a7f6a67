// The runs submitted to a cluster scheduler (runner/cluster_jobs.h) on a real store: rows
// added, updated and listed (all, or of one experiment), read back from a read-only store.
// No scheduler: the rows only (tests/slurm/ runs a real Slurm).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "runner/cluster_jobs.h"
#include "storage/store.h"
#include "tests/schema_columns.h"
#include "tests/scratch.h"

namespace tfw::runner {
namespace {

namespace fs = std::filesystem;

std::string fresh_store(const std::string& name) { return test::fresh_store("cluster-jobs-" + name); }

// The columns a row is read from are declared once (runner/cluster_jobs.cpp, with
// storage/row_columns.h): the list is the schema's, in order, so a column added by a migration
// and not to the list (or the other way) fails here.
TEST(ClusterJobs, TheOneListOfColumnsIsTheSchemas) {
  const std::string path = fresh_store("columns");
  Store::open(path);  // creates the schema
  EXPECT_EQ(ClusterJobs::columns(), test::schema_columns(path, "cluster_jobs"));
  EXPECT_EQ(ClusterJobs::columns().size(), 12u);
}

TEST(ClusterJobs, RowsAreAddedUpdatedAndListedByExperiment) {
  const std::string path = fresh_store("rows");
  {
    auto store = Store::open(path);
    ClusterJobs jobs(*store);
    ClusterJobRow row;
    row.experiment = "e1";
    row.run = "a";
    row.job_id = "123_0";
    row.state = "PENDING";
    row.script = "/work/a/slurm-job.sh";
    row.log = "/work/a.log";
    const std::int64_t first = jobs.add(row);
    row.experiment = "e2";
    row.run = "b";
    row.job_id = "124";
    const std::int64_t second = jobs.add(row);
    EXPECT_LT(first, second);

    const std::vector<ClusterJobRow> all = jobs.list();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].id, first);
    EXPECT_EQ(all[0].experiment, "e1");
    EXPECT_EQ(all[0].run, "a");
    EXPECT_EQ(all[0].scheduler, "slurm");
    EXPECT_EQ(all[0].job_id, "123_0");
    EXPECT_EQ(all[0].state, "PENDING");
    EXPECT_EQ(all[0].script, "/work/a/slurm-job.sh");
    EXPECT_EQ(all[0].log, "/work/a.log");
    EXPECT_GT(all[0].submitted, 0);
    EXPECT_EQ(all[0].updated, all[0].submitted);
    EXPECT_EQ(all[0].exit_code, -1);
    EXPECT_EQ(all[1].id, second);

    jobs.update(first, "COMPLETED", 0, "done");
    jobs.update(first, "COMPLETED", -1, "again");  // a negative exit code keeps the stored one
    const std::vector<ClusterJobRow> e1 = jobs.list("e1");
    ASSERT_EQ(e1.size(), 1u);
    EXPECT_EQ(e1[0].state, "COMPLETED");
    EXPECT_EQ(e1[0].exit_code, 0);
    EXPECT_EQ(e1[0].reason, "again");
    EXPECT_GE(e1[0].updated, e1[0].submitted);
    EXPECT_TRUE(jobs.list("e3").empty());
  }
  auto reader = Store::open_readonly(path);
  EXPECT_EQ(ClusterJobs(*reader).list().size(), 2u);
}

}  // namespace
}  // namespace tfw::runner
