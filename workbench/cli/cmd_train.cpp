// `tfw train CONFIG.toml` trains one run; `tfw train --resume RUN` continues it from its last
// valid checkpoint. Ctrl-C or SIGTERM finishes the step, checkpoints and exits with 130.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "engine/dist/distributed.h"
#include "engine/core/error.h"
#include "engine/machine/runtime.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "runner/parallel.h"
#include "workbench/service/remote_book.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

std::atomic<bool> train_stop_requested{false};

// The headline metrics of an evaluation beside its loss (an image classifier's accuracy):
// " | accuracy 0.8123" on progress lines, ", accuracy 0.8123" in the summary.
std::string headline_metrics(const std::vector<Metric>& metrics, const char* separator = " |") {
  std::string out;
  for (const Metric& m : metrics) {
    if (m.headline) out += fmt::format("{} {} {:.4f}", separator, m.key, m.value);
  }
  return out;
}

// An MFU as a percentage, or `missing` when it was not measured (NaN: no honest peak, peak.h).
std::string mfu_text(double mfu, const std::string& missing) {
  return std::isfinite(mfu) ? fmt::format("{:.1f}%", 100 * mfu) : std::string(missing);
}

extern "C" void on_stop_signal(int signal_number) {
  train_stop_requested.store(true);
  // A second Ctrl-C ends the process at once. SIGTERM may come more than once (the kernel
  // repeats PR_SET_PDEATHSIG as a dying multi-threaded parent's threads exit, e.g. a killed
  // service): it only asks to stop.
  if (signal_number == SIGINT) std::signal(SIGINT, SIG_DFL);
}

struct TrainArgs {
  runner::RunRequest request;
  std::string home;
  bool json = false;
  int nproc = 1;
  std::string record_to, token_file;  // record to a service instead of the local store
};

void train_command(TrainArgs& args) {
  runner::RunRequest& request = args.request;
  request.home = home_resolve(args.home);
  // Recording to a service: only rank 0 of a data-parallel world records.
  const auto [record_to, token_file] = service::record_target(args.record_to, args.token_file);
  const std::optional<DistEnv> world = dist_env_from_environment();
  if (!record_to.empty() && (!world || world->rank == 0)) {
    const double timeout = service::record_timeout_from_environment();
    try {
      request.book = service::remote_run_book(record_to, token_file, timeout);
    } catch (const UsageError&) {
      throw;  // refused: a token is missing or wrong
    } catch (const std::exception& e) {
      const std::string what = e.what();
      throw Error(with_hint(fmt::format("--record-to {}: {}", record_to, what.substr(0, what.find('\n'))),
                            "start `tfw serve --listen HOST:PORT --token-file FILE` on the machine that holds the "
                            "store, or train without --record-to (TFW_RECORD_TO) to record in this TFW_HOME"));
    }
  }
  const bool tty = isatty(STDERR_FILENO);
  std::int64_t log_every = 1;
  runner::RunHooks hooks;
  hooks.on_message = [](const std::string& message) { std::cerr << message << "\n"; };
  hooks.on_start = [&](const RunConfig& config, const std::string& run_dir, bool resuming) {
    log_every = config.train.log_every;
    if (!args.json) {
      std::cerr << fmt::format("{} {} ({}): {} -> {}\n", resuming ? "resuming" : "training", config.model.name,
                               config.model.family, config.model.spec->summary(), run_dir);
    }
  };
  hooks.on_progress = [&](const TrainProgress& p) {
    std::string line = fmt::format(
        "step {}/{} | loss {:.4f} | lr {:.2e} | {:.0f} tok/s | MFU {} | "
        "step {:.1f} ms, data {:.2f} ms | ETA {}",
        p.step, p.total_steps, p.loss, p.lr, p.tokens_per_second, mfu_text(p.mfu, "-"), 1e3 * p.step_seconds,
        1e3 * p.data_seconds, duration_text(p.eta_seconds));
    if (p.evaluated) {
      std::cerr << (tty ? "\r\033[K" : "") << line << fmt::format(" | val {:.4f}", p.val_loss)
                << headline_metrics(p.val_metrics) << "\n";
    } else if (tty) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else if (p.step % log_every == 0) {
      std::cerr << line << "\n";
    }
  };
  runner::RunOutcome outcome;
  {
    const StopSignals signals(on_stop_signal);
    outcome = runner::run_parallel(registry(), request, args.nproc, &train_stop_requested, hooks);
  }
  // Ranks other than 0 train quietly: rank 0 reports and records the run.
  if (outcome.rank != 0) {
    if (outcome.summary.interrupted) throw Interrupted();
    return;
  }
  const TrainSummary& summary = outcome.summary;
  const std::string name = fs::path(outcome.run_dir).filename().string();
  if (tty) std::cerr << "\r\033[K";
  if (args.json) {
    const double share = outcome.other_cpu_share;
    nlohmann::json val_json = nlohmann::json::object();  // every metric of the last evaluation
    for (const Metric& m : summary.val_metrics)
      val_json[m.key] = std::isfinite(m.value) ? nlohmann::json(m.value) : nullptr;
    print_json({{"run_id", outcome.run_id},
                {"run_dir", outcome.run_dir},
                {"name", outcome.model_name},
                {"family", outcome.family},
                {"parameters", summary.parameters},
                {"steps", summary.steps},
                {"examples", summary.examples},
                {"tokens", summary.tokens},
                {"training_flops", summary.flops},
                {"train_loss", summary.train_loss},
                {"val_loss", summary.val_loss},
                {"best_val_loss", summary.best_val_loss},
                {"val", val_json},
                {"seconds", summary.seconds},
                {"tokens_per_second", summary.tokens_per_second},
                {"mfu", std::isfinite(summary.mfu) ? nlohmann::json(summary.mfu) : nlohmann::json(nullptr)},
                {"peak_flops", summary.peak_flops},
                {"last_checkpoint", summary.last_checkpoint},
                {"interrupted", summary.interrupted},
                {"other_cpu_share", std::isfinite(share) ? nlohmann::json(share) : nlohmann::json(nullptr)},
                {"threads", summary.threads},
                {"thread_changes", summary.thread_changes},
                {"world_size", summary.world_size},
                {"micro_batch", summary.micro_batch},
                {"grad_accum", summary.grad_accum},
                {"comm_seconds", summary.comm_seconds},
                {"memory",
                 {{"estimate_bytes", summary.memory_estimate_bytes},
                  {"peak_bytes", summary.memory_peak_bytes},
                  {"peak_of", summary.memory_peak_of}}},
                {"build",
                 {{"libtorch", torch_version()},
                  {"cuda", torch_cuda_version()},
                  {"cuda_linked", cuda_load().loaded},
                  {"cuda_devices", cuda_device_count()}}},
                {"time",
                 {{"step", summary.step_seconds},
                  {"data", summary.data_seconds},
                  {"eval", summary.eval_seconds},
                  {"checkpoint", summary.checkpoint_seconds},
                  {"growth", summary.growth_seconds},
                  {"process", summary.process_seconds},
                  {"recent_step", summary.recent_step_seconds},
                  {"recent_data", summary.recent_data_seconds}}}});
  } else {
    std::cout << fmt::format("run {} {}: {} steps, {} examples, {} tokens, {:.3e} training FLOPs, {}\n", outcome.run_id,
                             name, summary.steps, grouped(summary.examples), grouped(summary.tokens), summary.flops,
                             duration_text(summary.seconds));
    std::cout << fmt::format(
        "  val loss {:.4f} (best {:.4f}){}, train loss {:.4f}, {:.0f} tokens/s, MFU {}\n", summary.val_loss,
        summary.best_val_loss, headline_metrics(summary.val_metrics, ","), summary.train_loss,
        summary.tokens_per_second,
        mfu_text(summary.mfu, summary.peak_flops > 0 ? fmt::format("not measured (the run went faster than the peak "
                                                                   "of {:.3e} FLOP/s it was given: "
                                                                   "train.peak_flops, or the cached probe, is too low)",
                                                                   summary.peak_flops)
                                                     : "not measured (no idle peak: other processes used the CPUs "
                                                       "when it was probed)"));
    const double other = summary.process_seconds - summary.step_seconds - summary.data_seconds - summary.eval_seconds -
                         summary.checkpoint_seconds - summary.growth_seconds;
    std::cout << fmt::format(
        "  time: steps {:.2f} s, data {:.2f} s, evaluation {:.2f} s, checkpoints {:.2f} s{}, "
        "other {:.2f} s, of {:.2f} s in this process\n",
        summary.step_seconds, summary.data_seconds, summary.eval_seconds, summary.checkpoint_seconds,
        summary.growth_seconds > 0 ? fmt::format(", growth {:.2f} s", summary.growth_seconds) : "",
        std::max(0.0, other), summary.process_seconds);
    if (summary.world_size > 1) {
      std::cout << fmt::format(
          "  data parallel: {} ranks (Gloo); averaging gradients took {:.2f} s of the steps' "
          "{:.2f} s\n",
          summary.world_size, summary.comm_seconds, summary.step_seconds);
    }
    std::cout << "  checkpoint " << summary.last_checkpoint << "\n";
  }
  if (outcome.contended) {
    std::cerr << fmt::format(
        "note: other processes used {:.0f}% of the CPUs while this run trained: its tokens/s, "
        "MFU and wall time are not comparable with a run on an idle machine\n",
        100 * outcome.other_cpu_share);
  }
  if (summary.interrupted) {
    std::cerr << fmt::format("interrupted; resume with: tfw train --resume {}\n", outcome.run_dir);
    throw Interrupted();
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  runner::RunRequest& request = args->request;
  CLI::App* command = app.add_subcommand("train", "Train one run from a config, or resume one");
  command->add_option("config", request.config, "run config TOML ([model], [data], [train])");
  command->add_option("--set", request.overrides, "override a config key, e.g. --set train.max_steps=200")
      ->allow_extra_args(false);
  command->add_option("--name", request.name,
                      "run name (default: the config's name); the run folder is TFW_HOME/runs/NAME");
  command->add_option("--resume", request.resume,
                      "continue RUN (its id, name or folder) from its last valid checkpoint");
  command->add_option("--init-from", request.init_from,
                      "start from this checkpoint's weights (e.g. one written by tfw grow); the run records its "
                      "lineage");
  command->add_option("--extend", request.extend,
                      "with --resume and a new budget: keep (the lr schedule stays as it was) or stretch (recomputed "
                      "over the new budget)");
  command
      ->add_option("--profile", request.profile_steps,
                   "record STEPS steps after 3 warm-up steps with LibTorch's profiler: a Chrome trace in the run's "
                   "folder (profile/) and a table of where a step's time went")
      ->type_name("STEPS")
      ->check(CLI::PositiveNumber);
  command->add_option("--experiment", request.experiment, "record the run under this experiment (default: default)");
  add_home_option(command, args->home);
  command->add_flag("--json", args->json, "print the summary as JSON (keys in docs/cli.md)");
  command->add_option("--record-to", args->record_to,
                      "HOST:PORT of a `tfw serve` that records the run in its store (default: $TFW_RECORD_TO); "
                      "checkpoints stay in this machine's TFW_HOME (docs/cluster.md)");
  command->add_option("--token-file", args->token_file, "with --record-to: the service's token file ($TFW_TOKEN_FILE)");
  command->add_option(
      "--nproc", args->nproc,
      "train over N processes on this machine (data parallel, Gloo; the threads are split between "
      "them). On a cluster, launch one process per rank with srun or torchrun instead (docs/cluster.md)");
  command->callback([args] { train_command(*args); });
}

}  // namespace tfw::cli
