// `tfw train CONFIG.toml` trains one run; `tfw train --resume RUN` continues it from its last
// valid checkpoint. Ctrl-C or SIGTERM finishes the step, checkpoints and exits with 130.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "engine/checkpoint_meta.h"
#include "engine/error.h"
#include "engine/home.h"
#include "engine/registry.h"
#include "engine/runtime.h"
#include "engine/train/schedule.h"
#include "engine/trainer.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/common/load.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

std::atomic<bool> stop_requested{false};

extern "C" void on_stop_signal(int signal_number) {
  stop_requested.store(true);
  std::signal(signal_number, SIG_DFL);  // a second Ctrl-C ends the process at once
}

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string name;
  std::string home;
  std::string resume;
  std::string init_from;
  std::string experiment = "default";
  std::string extend;
  bool json = false;
};

// A run to resume: its id or name in the store, or its folder.
std::pair<std::string, std::int64_t> resolve_run(const std::string& run, const std::string& home, Store& store) {
  if (std::optional<RunRecord> record = store.run_find(run); record && fs::is_directory(record->run_dir)) {
    return {record->run_dir, record->id};
  }
  for (const std::string& dir : {run, home + "/runs/" + run}) {
    if (!fs::is_directory(dir)) continue;
    for (const RunRecord& record : store.runs()) {
      std::error_code ec;  // a record whose folder is gone (or was in a home moved elsewhere) is no match
      if (fs::equivalent(record.run_dir, dir, ec)) return {dir, record.id};
    }
    return {dir, 0};  // a run folder the store does not know: recorded anew
  }
  throw UsageError(with_hint(fmt::format("run '{}' not found: not a run id or name in {}, nor a run folder", run,
                                         store.path()),
                             "list the runs with `tfw runs list`"));
}

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

void check_same_model(const RunConfig& given, const RunConfig& stored) {
  std::ostringstream a, b;
  a << *given.resolved["model"].as_table();
  b << *stored.resolved["model"].as_table();
  if (given.model.family != stored.model.family || a.str() != b.str()) {
    throw UsageError(with_hint(fmt::format("{} does not fit the checkpoint: its model is {} ({}), the run's is {} ({})",
                                           given.model.path, given.model.spec->summary(), given.model.family,
                                           stored.model.spec->summary(), stored.model.family),
                               "resume without a config (the run's own is used), or start a new run"));
  }
}

void run_train(const TrainArgs& args) {
  const std::string home = home_resolve(args.home);
  std::unique_ptr<Store> store = Store::open(home + "/runs.db");
  std::int64_t run_id = 0;
  RunConfig config;
  TrainOptions options;
  options.home = home;
  if (!args.resume.empty()) {
    std::tie(options.run_dir, run_id) = resolve_run(args.resume, home, *store);
    std::vector<std::string> train_overrides;
    for (const std::string& item : args.overrides) train_overrides.push_back(item);
    config = train_resume_config(registry(), options.run_dir, train_overrides, args.extend);
    if (!args.config.empty()) check_same_model(run_config_load(registry(), args.config), config);
    options.resume = true;
  } else {
    if (args.config.empty()) throw UsageError("tfw train needs a CONFIG.toml, or --resume RUN");
    config = run_config_load(registry(), args.config, args.overrides);
    // A config that cannot train (no budget, a model that cannot fit in memory) is refused
    // before anything is recorded or replaced.
    train_memory_check(config, train_plan(config));
    if (!args.init_from.empty()) {
      // The model must be the checkpoint's; [data] and [train] are the new run's.
      const CheckpointMeta origin = checkpoint_read_meta(args.init_from);
      RunConfig stored = run_config_parse(registry(), toml::parse(origin.config_toml, args.init_from), args.init_from);
      check_same_model(config, stored);
      options.init_from = args.init_from;
    }
    const std::string name = args.name.empty() ? config.model.name : args.name;
    name_check(name, "run name", args.name.empty() ? config.model.path + ": name" : "--name");
    name_check(args.experiment, "experiment name", "--experiment");
    options.run_dir = args.experiment == "default" ? home + "/runs/" + name
                                                   : home + "/runs/" + args.experiment + "/" + name;
    if (!checkpoint_list(options.run_dir + "/checkpoints").empty()) {
      throw UsageError(with_hint(fmt::format("run '{}' already exists at {}", name, options.run_dir),
                                 fmt::format("continue it with `tfw train --resume {}`, or choose another --name",
                                             options.run_dir)));
    }
    // A run of that name that never wrote a checkpoint (killed early, failed on its data) has
    // nothing to resume: starting it again replaces its record instead of refusing the name.
    if (std::optional<RunRecord> old = store->run_in_experiment(args.experiment, name)) {
      if (old->status == "running") {
        throw UsageError(with_hint(fmt::format("run '{}' (id {}) is running (its heartbeat is fresh)", name, old->id),
                                   "wait for it, or stop it; a run that died shows as crashed after "
                                   "TFW_HEARTBEAT_TIMEOUT seconds"));
      }
      store->run_delete(old->id);
      std::cerr << fmt::format("run '{}' (id {}, {}) never wrote a checkpoint: starting it again replaces its record\n",
                               name, old->id, old->status);
    }
    std::error_code ec;
    for (const char* stale : {"/metrics.jsonl", "/config.toml"}) fs::remove(options.run_dir + stale, ec);
    fs::create_directories(options.run_dir);
  }
  // Record the run (a new one, or the resumed one as the same run).
  std::ostringstream config_text;
  config_text << config.resolved;
  if (run_id == 0) {
    RunRecord record;
    record.name = fs::path(options.run_dir).filename().string();
    record.experiment = args.experiment;
    record.family = config.model.family;
    record.config = config_text.str();
    record.seed = static_cast<std::int64_t>(config.train.seed);
    record.git_commit = TFW_GIT_COMMIT;
    record.host = host_name();
    record.parameters = config.model.spec->parameter_count();
    record.run_dir = fs::absolute(options.run_dir).string();
    if (!options.init_from.empty()) {  // a grown model: a child of the run it was grown from
      const CheckpointMeta origin = checkpoint_read_meta(options.init_from);
      record.inherited_flops = origin.inherited_flops + origin.flops;
      record.growth_method = origin.growth_method;
      record.growth_options = origin.growth_options;
      if (origin.parent_run != 0 && store->run_get(origin.parent_run)) {
        record.parent = origin.parent_run;
        record.stage = store->run_get(origin.parent_run)->stage + 1;
      } else if (auto owner = store->checkpoint_run(fs::absolute(options.init_from).string())) {
        record.parent = *owner;  // started from a plain checkpoint of another run
        record.stage = store->run_get(*owner)->stage + 1;
      }
    }
    run_id = store->run_create(record);
  } else {
    store->run_set_status(run_id, "running");
  }
  MetricWriter writer(home + "/runs.db");
  writer.heartbeat_add(run_id);
  std::int64_t last_tokens = 0;
  double last_flops = 0;
  options.on_metric = [&](const char* key, std::int64_t step, std::int64_t tokens, double flops, double wall,
                          double value) {
    writer.push({run_id, key, step, tokens, flops, wall, value});
    last_tokens = tokens;
    last_flops = flops;
  };
  options.before_checkpoint = [&] { writer.flush(); };  // metrics up to a checkpoint are committed before it
  options.on_checkpoint = [&](const std::string& path, std::int64_t step, std::uint32_t crc32, std::uint64_t bytes) {
    store->run_set_progress(run_id, last_tokens, last_flops);
    store->checkpoint_add({run_id, step, static_cast<std::int64_t>(bytes), fs::absolute(path).string(),
                           fmt::format("crc32:{:08x}", crc32)});
  };
  options.on_checkpoint_removed = [&](const std::string& path) {
    store->checkpoint_remove(run_id, fs::absolute(path).string());
  };
  options.on_event = [&](const std::string& kind, std::int64_t step, const std::string& payload) {
    store->event_add({run_id, step, kind, payload, 0});
  };

  const bool tty = isatty(STDERR_FILENO);
  const std::int64_t log_every = config.train.log_every;
  options.stop = &stop_requested;
  options.on_message = [](const std::string& message) { std::cerr << message << "\n"; };
  options.on_progress = [&](const TrainProgress& p) {
    std::string line = fmt::format("step {}/{} | loss {:.4f} | lr {:.2e} | {:.0f} tok/s | MFU {:.1f}% | ETA {}",
                                   p.step, p.total_steps, p.loss, p.lr, p.tokens_per_second, 100 * p.mfu,
                                   duration_text(p.eta_seconds));
    if (p.evaluated) {
      std::cerr << (tty ? "\r\033[K" : "") << line << fmt::format(" | val {:.4f}", p.val_loss) << "\n";
    } else if (tty) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else if (p.step % log_every == 0) {
      std::cerr << line << "\n";
    }
  };
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  if (!args.json) {
    std::cerr << fmt::format("{} {} ({}): {} -> {}\n", options.resume ? "resuming" : "training", config.model.name,
                             config.model.family, config.model.spec->summary(), options.run_dir);
  }
  TrainSummary summary;
  const LoadMeter load;  // other processes' share of the CPUs while this run trains
  try {
    summary = train_run(registry(), config, options);
  } catch (const std::exception& e) {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    writer.flush();
    writer.heartbeat_remove(run_id);
    store->run_set_progress(run_id, last_tokens, last_flops);
    store->run_finish(run_id, "failed", "{}", e.what());
    throw;
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  writer.flush();
  writer.heartbeat_remove(run_id);
  store->run_set_progress(run_id, summary.tokens, summary.flops);
  const double other_share = load.other_cpu_share();
  nlohmann::json final_metrics = {{"train_loss", summary.train_loss}, {"val_loss", summary.val_loss},
                                  {"best_val_loss", summary.best_val_loss}, {"steps", summary.steps},
                                  {"tokens_per_second", summary.tokens_per_second}, {"mfu", summary.mfu}};
  const bool contended = load_contended(other_share, runtime_threads());
  if (std::isfinite(other_share)) {
    final_metrics["other_cpu_share"] = other_share;
    final_metrics["contended"] = contended;
  }
  store->run_finish(run_id, summary.interrupted ? "killed" : "finished", final_metrics.dump());
  if (tty) std::cerr << "\r\033[K";
  if (args.json) {
    print_json({{"run_id", run_id}, {"run_dir", options.run_dir}, {"name", config.model.name}, {"family", config.model.family},
                {"parameters", summary.parameters}, {"steps", summary.steps}, {"tokens", summary.tokens},
                {"training_flops", summary.flops}, {"train_loss", summary.train_loss},
                {"val_loss", summary.val_loss}, {"best_val_loss", summary.best_val_loss},
                {"seconds", summary.seconds}, {"tokens_per_second", summary.tokens_per_second},
                {"mfu", summary.mfu}, {"peak_flops", summary.peak_flops},
                {"last_checkpoint", summary.last_checkpoint}, {"interrupted", summary.interrupted},
                {"other_cpu_share", std::isfinite(other_share) ? nlohmann::json(other_share) : nlohmann::json(nullptr)}});
  } else {
    std::cout << fmt::format("run {} {}: {} steps, {} tokens, {:.3e} training FLOPs, {}\n", run_id,
                             fs::path(options.run_dir).filename().string(), summary.steps,
                             grouped(summary.tokens), summary.flops, duration_text(summary.seconds));
    std::cout << fmt::format("  val loss {:.4f} (best {:.4f}), train loss {:.4f}, {:.0f} tokens/s, MFU {:.1f}%\n",
                             summary.val_loss, summary.best_val_loss, summary.train_loss, summary.tokens_per_second,
                             100 * summary.mfu);
    std::cout << "  checkpoint " << summary.last_checkpoint << "\n";
  }
  if (contended) {
    std::cerr << fmt::format("note: other processes used {:.0f}% of the CPUs while this run trained: its tokens/s, "
                             "MFU and wall time are not comparable with a run on an idle machine\n",
                             100 * other_share);
  }
  if (summary.interrupted) {
    std::cerr << fmt::format("interrupted; resume with: tfw train --resume {}\n", options.run_dir);
    throw Interrupted();
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* command = app.add_subcommand("train", "Train one run from a config, or resume one");
  command->add_option("config", args->config, "run config TOML ([model], [data], [train])");
  command->add_option("--set", args->overrides, "override a config key, e.g. --set train.max_steps=200")
      ->allow_extra_args(false);
  command->add_option("--name", args->name, "run name (default: the config's name); the run folder is TFW_HOME/runs/NAME");
  command->add_option("--resume", args->resume, "continue RUN (its id, name or folder) from its last valid checkpoint");
  command->add_option("--init-from", args->init_from,
                      "start from this checkpoint's weights (e.g. one written by tfw grow); the run records its "
                      "lineage");
  command->add_option("--extend", args->extend,
                      "with --resume and a new budget: keep (the lr schedule stays as it was) or stretch (recomputed "
                      "over the new budget)");
  command->add_option("--experiment", args->experiment, "record the run under this experiment (default: default)");
  command->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
  command->add_flag("--json", args->json, "print the summary as JSON (keys in docs/cli.md)");
  command->callback([args] { run_train(*args); });
}

}  // namespace tfw::cli
