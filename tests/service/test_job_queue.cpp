// The engine service's job queue (workbench/service/job_queue.h) on a real store: on a store
// migrated from before the jobs table existed, and every job status through its name and
// the schema's CHECK. No service process: the queue's rows only.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "storage/store.h"
#include "workbench/service/job_queue.h"
#include "tests/schema_columns.h"
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
  for (JobStatus status :
       {JobStatus::queued, JobStatus::running, JobStatus::finished, JobStatus::failed, JobStatus::cancelled}) {
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

// A job's columns are declared once (workbench/service/job_queue.cpp, with
// storage/row_columns.h): the list is the schema's, in order, and every field written comes
// back; a job not yet started or ended reads 0 and -1 from the NULLs the store keeps.
TEST(JobQueue, TheOneListOfColumnsIsTheSchemasAndEveryFieldComesBack) {
  const std::string path = fresh_store("columns");
  auto store = Store::open(path);
  EXPECT_EQ(JobQueue::columns(), test::schema_columns(path, "jobs"));
  EXPECT_EQ(JobQueue::columns().size(), 12u);

  JobQueue jobs(*store);
  JobRow job;
  job.kind = "run";
  job.name = "every-field";
  job.file = "/jobs/1/run.toml";
  job.client = "127.0.0.1:5000";
  job.capability = "0123abcd";
  const std::int64_t id = jobs.create(job);
  const JobRow queued = *jobs.get(id);
  EXPECT_EQ(queued.id, id);
  EXPECT_EQ(queued.kind, "run");
  EXPECT_EQ(queued.name, "every-field");
  EXPECT_EQ(queued.file, "/jobs/1/run.toml");
  EXPECT_EQ(queued.status, JobStatus::queued);
  EXPECT_GT(queued.submitted, 0);
  EXPECT_EQ(queued.started, 0);
  EXPECT_EQ(queued.ended, 0);
  EXPECT_EQ(queued.exit_code, -1);
  EXPECT_EQ(queued.error, "");
  EXPECT_EQ(queued.client, "127.0.0.1:5000");
  EXPECT_EQ(queued.capability, "0123abcd");

  jobs.set_status(id, JobStatus::running);
  jobs.set_status(id, JobStatus::failed, 3, "the run failed");
  const JobRow failed = *jobs.first_named("every-field");
  EXPECT_EQ(failed.status, JobStatus::failed);
  EXPECT_GE(failed.started, queued.submitted);
  EXPECT_GE(failed.ended, failed.started);
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_EQ(failed.error, "the run failed");
}

}  // namespace
}  // namespace tfw::service
