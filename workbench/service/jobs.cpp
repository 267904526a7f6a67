// Jobs: each worker takes a queued job and executes its experiment file through the runner's
// batch on a local executor (runner/batch.h), the same code `tfw run` uses. The runs are
// child processes in the job's folder, confined to TFW_HOME (TFW_CONFINE); a cancel or the
// service stopping sets the batch's stop flag, and the runs checkpoint and end as killed.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "engine/machine/cores.h"
#include "engine/plugin/registry.h"
#include "runner/batch.h"
#include "runner/executor_local.h"
#include "workbench/service/service_impl.h"

namespace tfw::service {

namespace fs = std::filesystem;

json Service::Impl::cancel(std::int64_t id, const std::string& capability) {
  JobQueue jobs(*store);
  std::optional<JobRow> job = jobs.get(id);
  if (!job) throw UsageError(fmt::format("no job {}", id));
  // Only the client that submitted a job may cancel it.
  if (!capability_equal(job->capability, capability)) {
    throw UsageError(with_hint(fmt::format("cancel: job {} is not held by this client (its \"capability\" {})", id,
                                           capability.empty() ? "is missing" : "does not match"),
                               "a job is cancelled by the client that submitted it, with the capability its submit "
                               "replied with (`tfw cancel` sends the one `tfw submit` kept)"));
  }
  std::lock_guard<std::mutex> lock(jobs_mutex);
  if (auto queued = std::find(queue.begin(), queue.end(), id); queued != queue.end()) {
    queue.erase(queued);
    jobs.set_status(id, JobStatus::cancelled, -1, "cancelled before it started");
    return {{"type", "cancelled"}, {"job", id}, {"was", "queued"}};
  }
  if (auto found = running.find(id); found != running.end()) {
    cancel_requested.insert(id);
    found->second->store(true);  // its batch stops: the runs checkpoint and end as killed
    return {{"type", "cancelled"}, {"job", id}, {"was", "running"}};
  }
  throw UsageError(fmt::format("job {} is {}: nothing to cancel", id, status_name(job->status)));
}

// Executes a job's experiment file in-process through the runner's batch; the batch's lines
// go to the job's log. Returns an exit code as `tfw run` would: 0 all finished, 130 stopped,
// 2 a bad experiment, 1 a run that did not finish.
int Service::Impl::run_job(const JobRow& job, int threads, const std::atomic<bool>& stop) {
  const fs::path folder = fs::path(job.file).parent_path();
  std::ofstream log(folder / "job.log", std::ios::app);
  try {
    const Experiment experiment = experiment_load(registry(), job.file);
    runner::LocalOptions local;
    local.program = options.tfw;
    local.slots = 1;
    local.threads = threads;
    local.cwd = folder.string();                  // relative paths in the job resolve in its folder
    local.environment = {"TFW_CONFINE=" + home};  // every file a run reads must lie in TFW_HOME
    runner::LocalExecutor executor(local);
    runner::BatchOptions batch;
    batch.home = home;
    batch.stop = &stop;
    batch.on_message = [&](const std::string& line) { log << line << std::endl; };
    const runner::BatchResult result =
        runner::batch_execute(experiment, runner::batch_select(experiment, ""), executor, batch);
    log << result.summary << std::endl;
    if (result.interrupted) return 130;
    return result.failed + result.blocked > 0 ? 1 : 0;
  } catch (const UsageError& e) {
    log << "error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    log << "error: " << e.what() << std::endl;
    return 1;
  }
}

void Service::Impl::worker_loop(int slot) {
  auto writer = Store::open(home + "/runs.db");
  JobQueue jobs(*writer);
  const int threads = std::max(1, threads_default() / std::max(1, options.jobs));
  while (true) {
    std::int64_t id = 0;
    auto stop = std::make_shared<std::atomic<bool>>(false);
    {
      std::unique_lock<std::mutex> lock(jobs_mutex);
      jobs_wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      id = queue.front();
      queue.pop_front();
      running[id] = stop;
    }
    std::optional<JobRow> job = jobs.get(id);
    int code = -1;
    if (job) {
      jobs.set_status(id, JobStatus::running);
      code = run_job(*job, threads, *stop);
    }
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(jobs_mutex);
      running.erase(id);
      cancelled = cancel_requested.erase(id) > 0;
    }
    if (!job) continue;
    if (cancelled) {
      jobs.set_status(id, JobStatus::cancelled, code,
                      "cancelled while running: its runs checkpointed and ended as killed");
    } else if (stopping) {
      jobs.set_status(id, JobStatus::queued, -1, "interrupted by the service stopping: resumes at the next start");
    } else if (code == 0) {
      jobs.set_status(id, JobStatus::finished, code);
    } else {
      std::ifstream in(fs::path(job->file).parent_path() / "job.log");
      std::string text((std::istreambuf_iterator<char>(in)), {});
      if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
      jobs.set_status(id, JobStatus::failed, code, text);
    }
  }
}

}  // namespace tfw::service
