// `tfw run EXPERIMENT.toml [--jobs N] [--only PATTERN | --unit NAME] [--dry-run]`: plan an experiment file
// and execute it through the runner's batch on the local executor (runner/batch.h): each run
// is a child `tfw train` process (a grown stage is `tfw grow` from its parent's last
// checkpoint, then `tfw train --init-from`), so runs are isolated and --jobs shares the
// cores between them. Running the file again skips finished runs and resumes killed or
// crashed ones; SIGINT/SIGTERM stop the children, which checkpoint, and the batch exits 130.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/data/stored_paths.h"
#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "runner/batch.h"
#include "runner/executor_local.h"
#include "runner/executor_slurm.h"
#include "storage/store.h"
#include "workbench/service/client.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/cli/run_plan.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

std::atomic<bool> batch_stop_requested{false};
extern "C" void on_batch_signal(int) { batch_stop_requested.store(true); }

struct RunArgs {
  std::string file, only, unit, home;
  int jobs = 1;
  bool dry_run = false, json = false;
  std::string executor = "local";
  runner::SlurmOptions slurm;         // --executor slurm
  int nproc = 1;                      // ranks per run
  bool wait = false;                  // --executor slurm: follow the jobs to their end
  std::string record_to, token_file;  // the runs record to this service
};

// Everything a run needs, before any compute, in a dry run and a real one alike: a device
// this machine has, and its data (its config was validated as the file was read). A dry run
// still prints its plan (a paper's file plans on a machine without its corpus, a GPU file on a
// machine without a GPU), then the problems, and exits 2. A problem that stops several runs
// (36 runs on a corpus not prepared yet) is said once, naming them. Returns the problems;
// `stopped` gets the runs they stop.
std::vector<std::string> preflight(const std::string& file, const std::vector<const ExperimentRun*>& runs,
                                   const std::string& home, std::set<std::string>& stopped) {
  std::vector<std::pair<std::string, std::vector<const ExperimentRun*>>> stopping;  // problem -> its runs
  auto stops = [&](const std::string& problem, const ExperimentRun* run) {
    auto it = std::find_if(stopping.begin(), stopping.end(), [&](const auto& p) { return p.first == problem; });
    if (it == stopping.end()) it = stopping.insert(stopping.end(), {problem, {}});
    it->second.push_back(run);
  };
  for (const ExperimentRun* run : runs) {
    if (const std::optional<DeviceProblem> problem = device_check(run->config.train.device.text())) {
      stops(with_hint("train.device: " + problem->message, problem->hint), run);
    }
    try {
      data_preflight(run->config, home, "");
    } catch (const UsageError& e) {
      stops(e.what(), run);
    }
  }
  std::vector<std::string> problems;
  for (const auto& [problem, stopped_runs] : stopping) {
    for (const ExperimentRun* run : stopped_runs) stopped.insert(run->name);
    const ExperimentRun& first = *stopped_runs.front();
    if (stopped_runs.size() == 1) {
      problems.push_back(fmt::format("{}: runs.{} (run '{}'): {}", file, first.group, first.name, problem));
      continue;
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < std::min<std::size_t>(stopped_runs.size(), 3); ++i)
      names.push_back(stopped_runs[i]->name);
    problems.push_back(fmt::format("{}: {} runs ({}{}): {}", file, stopped_runs.size(), fmt::join(names, ", "),
                                   stopped_runs.size() > 3 ? ", ..." : "", problem));
  }
  return problems;
}

void run_experiment(const RunArgs& args) {
  const std::string home = home_resolve(args.home);
  if (!args.only.empty() && !args.unit.empty()) {
    throw UsageError(with_hint("--only and --unit both pick runs", "give one of them"));
  }
  // The file is read with device names checked for their form alone; a device this machine
  // lacks is one of the problems found before anything runs (listed after a dry run's plan), so
  // that a GPU experiment plans on a CPU machine.
  const Experiment experiment = [&] {
    const DeviceFormOnly form_only;
    return experiment_load(registry(), args.file);
  }();
  std::vector<const ExperimentRun*> runs = args.unit.empty() ? runner::batch_select(experiment, args.only)
                                                             : runner::batch_select_unit(experiment, args.unit);
  std::set<std::string> stopped;  // the runs that cannot start
  const std::vector<std::string> problems = preflight(args.file, runs, home, stopped);
  if (args.dry_run) print_plan(experiment, runs, home, args.json, problems);
  if (!problems.empty()) {
    throw UsageError(fmt::format("{} of {} runs cannot start; nothing was trained:\n{}", stopped.size(), runs.size(),
                                 fmt::join(problems, "\n")));
  }
  if (args.dry_run) return;
  if (args.executor != "local" && args.executor != "slurm") {
    throw UsageError(with_hint(fmt::format("--executor {}: unknown executor", args.executor),
                               "expected local (child processes on this machine) or slurm (sbatch, docs/cluster.md)"));
  }
  if (args.nproc < 1) {
    throw UsageError(with_hint(fmt::format("--nproc {}: expected 1 or more ranks per run", args.nproc),
                               "--nproc 2 trains each run over 2 processes"));
  }
  std::unique_ptr<runner::Executor> executor;
  if (args.executor == "slurm") {
    runner::SlurmOptions slurm = args.slurm;
    slurm.home = home;
    slurm.experiment = experiment.name;
    slurm.work_dir = home + "/experiments/" + experiment.name;
    slurm.nproc = args.nproc;
    slurm.array_cap = args.jobs > 1 ? static_cast<std::size_t>(args.jobs) : 0;
    executor = std::make_unique<runner::SlurmExecutor>(slurm);
  } else {
    runner::LocalOptions local;
    local.slots = static_cast<std::size_t>(std::max(1, args.jobs));
    local.nproc = args.nproc;
    executor = std::make_unique<runner::LocalExecutor>(local);
  }

  // A live line per running run: on a terminal one line rewritten in place, otherwise a
  // line every 30 s.
  const bool tty = isatty(STDERR_FILENO);
  auto last_print = std::chrono::steady_clock::now();
  bool line_open = false;
  auto clear_progress = [&] {
    if (tty && line_open) std::cerr << "\r\033[K" << std::flush;
    line_open = false;
  };
  runner::BatchOptions options;
  options.home = home;
  options.detach = args.executor == "slurm" && !args.wait;
  if (!args.record_to.empty()) {
    // The batch decides what to submit from this TFW_HOME's store: the service must write it.
    service::Client client(args.record_to, args.token_file);
    const std::string served = client.hello().value("home", "");
    std::error_code ec;
    if (!fs::equivalent(served, home, ec)) {
      throw UsageError(with_hint(fmt::format("--record-to {}: that service serves TFW_HOME {}, not this batch's {}",
                                             args.record_to, served, home),
                                 fmt::format("run the batch with --home {} (the batch reads the store the runs record "
                                             "to)",
                                             served)));
    }
    options.record_arguments = {"--record-to", args.record_to};
    if (!args.token_file.empty()) {
      options.record_arguments.insert(options.record_arguments.end(),
                                      {"--token-file", fs::absolute(args.token_file).string()});
    }
  }
  options.stop = &batch_stop_requested;
  options.on_message = [&](const std::string& line) {
    clear_progress();
    std::cerr << line << "\n";
  };
  options.on_progress = [&](const std::vector<runner::RunProgress>& progress) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty && now - last_print < std::chrono::seconds(30)) return;
    std::vector<std::string> parts;
    for (const runner::RunProgress& p : progress) {
      if (p.phase != "training") {
        parts.push_back(fmt::format("{}: {}", p.name, p.phase));
        continue;
      }
      parts.push_back(fmt::format("{}: step {}/{} | loss {:.4f} | {:.0f} tok/s | ETA {}", p.name, p.step, p.total_steps,
                                  p.loss, p.tokens_per_second,
                                  p.eta_seconds >= 0 ? duration_text(p.eta_seconds) : "?"));
    }
    const std::string line = fmt::format("{}", fmt::join(parts, "  ·  "));
    if (tty) {
      std::cerr << "\r\033[K" << line.substr(0, 200) << std::flush;
      line_open = true;
    } else {
      std::cerr << line << "\n";
    }
    last_print = now;
  };
  runner::BatchResult result;
  {
    const StopSignals signals(on_batch_signal);  // the runs checkpoint and the batch returns
    result = runner::batch_execute(experiment, runs, *executor, options);
  }
  clear_progress();
  std::cerr << result.summary << "\n";
  if (result.detached) {
    std::cerr << fmt::format(
        "follow them with `tfw jobs --slurm --experiment {}` (and `tfw runs list --experiment {}`); "
        "run this command again to resubmit failed or cancelled runs\n",
        experiment.name, experiment.name);
    return;
  }
  for (const std::string& note : result.contended) std::cerr << note << "\n";
  if (result.interrupted) throw Interrupted();
  if (result.failed + result.blocked > 0) {
    const auto unfinished = result.failed + result.blocked;
    throw Error(fmt::format("{} run{} did not finish (see the logs in {})", unfinished, unfinished == 1 ? "" : "s",
                            result.work_dir));
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* command = app.add_subcommand("run", "Plan and run an experiment file (docs/experiments.md)");
  command->add_option("experiment", args->file, "experiment TOML")->required();
  command
      ->add_option("--jobs", args->jobs,
                   "runs in parallel (local: the cores are shared between them; slurm: the job array's cap)")
      ->check(CLI::PositiveNumber);
  command->add_option("--executor", args->executor, "local (default) or slurm (sbatch; docs/cluster.md)");
  command->add_option("--nproc", args->nproc, "ranks per run (data parallel; under slurm, started with srun)");
  command->add_option("--partition", args->slurm.partition, "slurm: sbatch --partition");
  command->add_option("--account", args->slurm.account, "slurm: sbatch --account");
  command->add_option("--time", args->slurm.time, "slurm: sbatch --time, per run (e.g. 2:00:00)");
  command->add_option("--cpus-per-task", args->slurm.cpus_per_task,
                      "slurm: sbatch --cpus-per-task; also each rank's threads (default 1)");
  command->add_option("--gres", args->slurm.gres, "slurm: sbatch --gres (e.g. gpu:1)");
  command->add_option("--nodes-per-run", args->slurm.nodes_per_run, "slurm: nodes per run (sbatch --nodes)");
  command->add_option(
      "--record-to", args->record_to,
      "HOST:PORT of a `tfw serve` the runs record to, instead of this TFW_HOME's store (docs/cluster.md)");
  command->add_option("--token-file", args->token_file, "with --record-to: the service's token file");
  command->add_flag("--wait", args->wait, "slurm: follow the jobs until they end, instead of returning once submitted");
  command->add_option("--only", args->only, "only runs matching this glob (and their ancestors)");
  command->add_option("--unit", args->unit, "only the runs of this unit of the file's [units] (docs/experiments.md)");
  command->add_flag("--dry-run", args->dry_run, "print the plan (runs, parents, parameters, tokens, FLOPs, time)");
  add_home_option(command, args->home);
  command->add_flag("--json", args->json, "with --dry-run: the plan as JSON (keys in docs/cli.md)");
  command->callback([args] { run_experiment(*args); });
}

}  // namespace tfw::cli
