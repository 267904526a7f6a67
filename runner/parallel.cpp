// See parallel.h.
#include "runner/parallel.h"

#include <signal.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "engine/dist/distributed.h"
#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/machine/runtime.h"
#include "engine/core/process.h"

namespace tfw::runner {

namespace {

// A rank other than 0: agree on the config, then train without recording.
RunOutcome run_rank(const Registry& registry, const RunRequest& request, const std::shared_ptr<DistGroup>& dist,
                    const std::atomic<bool>* stop) {
  std::optional<RunConfig> mine;
  if (!request.config.empty() && request.resume.empty()) {
    mine = run_config_load(registry, request.config, request.overrides);
  }
  const RunConfig config = dist_agree_config(*dist, registry, mine ? &*mine : nullptr);
  TrainOptions options;
  options.home = request.home;
  options.dist = dist;
  options.stop = stop;
  RunOutcome outcome;
  outcome.rank = dist_rank(*dist);
  outcome.world_size = dist_world(*dist);
  outcome.model_name = config.model.name;
  outcome.family = config.model.family;
  outcome.summary = train_run(registry, config, options);
  outcome.status = outcome.summary.interrupted ? RunStatus::killed : RunStatus::finished;
  return outcome;
}

// The last lines of a rank's log, indented, for an error message.
std::string log_tail(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) all.push_back(line);
  }
  std::string tail;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) tail += "\n    " + all[i];
  return tail;
}

// What became of the ranks this process started (ranks[i] is rank i + 1, its output in
// logs[i]), for an error message.
std::string ranks_report(std::vector<Process>& ranks, const std::vector<std::string>& logs, double wait_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
  std::string report;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    Process& rank = ranks[i];
    while (!rank.poll() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::optional<int> code = rank.poll();
    if (!code || *code == 0) continue;
    report += fmt::format(
        "\n  rank {} (pid {}) {}; its output is in {}", i + 1, rank.pid(),
        *code > 128 ? fmt::format("was killed by signal {}", *code - 128) : fmt::format("exited with code {}", *code),
        logs[i]);
    if (*code <= 128) report += log_tail(logs[i], 3);
  }
  return report;
}

}  // namespace

RunOutcome run_parallel(const Registry& registry, const RunRequest& request, int nproc, const std::atomic<bool>* stop,
                        const RunHooks& hooks) {
  if (nproc < 1) {
    throw UsageError(with_hint(fmt::format("--nproc {}: expected 1 or more processes", nproc),
                               "--nproc 2 trains one run over 2 processes on this machine"));
  }
  std::optional<DistEnv> env = dist_env_from_environment();
  if (env && nproc > 1) {
    throw UsageError(with_hint(fmt::format("--nproc {}, but the environment already makes this process rank {} of {} "
                                           "(from {})",
                                           nproc, env->rank, env->world, env->source),
                               "use one or the other: --nproc on one machine, or a launcher (srun, torchrun) "
                               "that sets RANK and WORLD_SIZE"));
  }
  if (!env && nproc == 1) return run_recorded(registry, request, stop, hooks);

  std::vector<Process> ranks;     // started by this process (--nproc)
  std::vector<std::string> logs;  // their output, kept when something fails
  auto stop_ranks = [&] {
    for (Process& rank : ranks) rank.signal(SIGTERM);
  };
  if (!env) {
    DistEnv local;
    local.world = nproc;
    local.local_world = nproc;
    local.source = "--nproc";
    local.timeout_seconds = dist_timeout_from_environment();
    local.master_port = dist_master_port_from_environment().value_or(0);
    if (local.master_port == 0) local.master_port = dist_free_port();
    // The machine's threads are split between the ranks.
    const int threads = std::max(1, runtime_threads() / nproc);
    runtime_init(threads);
    for (int r = 1; r < nproc; ++r) {
      ProcessSpec spec;
      spec.argv = {self_executable(), "--threads", std::to_string(threads), "train", "--home", request.home};
      if (request.resume.empty() && !request.config.empty()) {
        spec.argv.push_back(request.config);
        for (const std::string& item : request.overrides) {
          spec.argv.push_back("--set");
          spec.argv.push_back(item);
        }
      } else {
        spec.argv.push_back("--resume");
        spec.argv.push_back(request.resume);
      }
      logs.push_back(fmt::format("{}/logs/train-{}-rank{}.log", request.home, getpid(), r));
      std::filesystem::create_directories(std::filesystem::path(logs.back()).parent_path());
      std::filesystem::remove(logs.back());
      spec.log_path = logs.back();
      spec.environment = {fmt::format("RANK={}", r),
                          fmt::format("WORLD_SIZE={}", nproc),
                          fmt::format("LOCAL_WORLD_SIZE={}", nproc),
                          "MASTER_ADDR=127.0.0.1",
                          fmt::format("MASTER_PORT={}", local.master_port),
                          fmt::format("TFW_DIST_TIMEOUT={:g}", local.timeout_seconds)};
      try {
        ranks.push_back(Process::spawn(spec));
      } catch (...) {
        stop_ranks();
        throw;
      }
    }
    env = local;
    if (hooks.on_message) {
      hooks.on_message(fmt::format("data parallel: {} ranks on this machine, {} thread{} each, rendezvous at {}:{}",
                                   nproc, threads, threads == 1 ? "" : "s", local.master_addr, local.master_port));
    }
  }

  std::shared_ptr<DistGroup> dist;
  try {
    dist = dist_connect(*env);
  } catch (const UsageError&) {
    stop_ranks();
    throw;
  } catch (const std::exception& e) {
    stop_ranks();
    throw Error(e.what() + ranks_report(ranks, logs, 2));
  }
  RunOutcome outcome;
  try {
    outcome =
        env->rank == 0 ? run_recorded(registry, request, stop, hooks, dist) : run_rank(registry, request, dist, stop);
  } catch (const UsageError& e) {
    dist_report_failure(*dist, e.what());
    ranks_report(ranks, logs, 5);  // they fail at their next collective, or with the same error: reap them
    stop_ranks();
    for (const std::string& log : logs) std::filesystem::remove(log);
    throw;
  } catch (const std::exception& e) {
    dist_report_failure(*dist, e.what());
    std::string report = ranks_report(ranks, logs, 5);
    stop_ranks();
    throw Error(e.what() + report);
  }
  outcome.rank = env->rank;
  outcome.world_size = env->world;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int code = ranks[i].wait();
    if (code != 0 && !outcome.summary.interrupted) {
      throw Error(
          fmt::format("rank {} (pid {}) exited with code {} after the run ended (its output is in {}); the "
                      "run is recorded as {}",
                      i + 1, ranks[i].pid(), code, logs[i], status_name(outcome.status)));
    }
  }
  for (const std::string& log : logs) std::filesystem::remove(log);
  return outcome;
}

}  // namespace tfw::runner
