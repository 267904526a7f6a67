// The engine service's job queue (workbench/service/job_queue.h) on a real store: on a store
// migrated from before the jobs table existed, and every job status through its name and
// the schema's CHECK. No service process: the queue's rows only.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "storage/store.h"
#include "workbench/service/job_queue.h"
#include "tests/scratch.h"

namespace tfw::service {
namespace {

namespace fs = std::filesystem;

std::string fresh_store(const std::string& name) { return test::fresh_store("job-queue-" + name); }

// v1 -> v2 keeps every run: the jobs table is added beside them, and both work.
TEST(JobQueue, WorksOnAStoreMigratedFromBeforeTheJobsTable) {
  std::string v1 = fresh_store("keep-v1");
  store_create_at_version(v1, 1);
  {
    auto writer = Store::open(v1);  // migrates; add a run, then check both tables work
    RunRecord run;
    run.name = "kept";
    run.family = "tokenformer";
    run.config = "[model]\nd = 8\n";
    writer->run_create(run);
    JobQueue jobs(*writer);
    JobRow job;
    job.name = "queued-job";
    job.file = "/x/experiment.toml";
    const std::int64_t id = jobs.create(job);
    jobs.set_status(id, JobStatus::running);
    EXPECT_EQ(jobs.get(id)->status, JobStatus::running);
    EXPECT_GT(jobs.get(id)->started, 0);
    jobs.set_status(id, JobStatus::failed, 3, "boom");
    EXPECT_EQ(jobs.get(id)->exit_code, 3);
    EXPECT_EQ(jobs.get(id)->error, "boom");
    EXPECT_EQ(jobs.list(JobStatus::failed).size(), 1u);
    EXPECT_TRUE(jobs.list(JobStatus::queued).empty());
  }
  EXPECT_EQ(Store::open_readonly(v1)->runs().size(), 1u);
}

// Every job status maps to one name and back; the names are the ones the schema's CHECK
// allows (a job stored with each status reads back as it).
TEST(JobQueue, EveryStatusNameRoundTripsThroughTheStore) {
  for (JobStatus status : {JobStatus::queued, JobStatus::running, JobStatus::finished, JobStatus::failed,
                           JobStatus::cancelled}) {
    EXPECT_EQ(job_status_parse(status_name(status)), status);
  }
  EXPECT_EQ(job_status_parse("killed"), std::nullopt);  // a run status, not a job's
  EXPECT_TRUE(status_final(JobStatus::cancelled));

  auto store = Store::open(fresh_store("statuses"));
  JobQueue jobs(*store);
  JobRow job;
  job.name = "j";
  const std::int64_t id = jobs.create(job);
  for (JobStatus status : {JobStatus::running, JobStatus::finished, JobStatus::failed, JobStatus::cancelled}) {
    jobs.set_status(id, status);
    EXPECT_EQ(jobs.get(id)->status, status) << status_name(status);
  }
}

}  // namespace
}  // namespace tfw::service
