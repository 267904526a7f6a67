// See recorded_run.h.
#include "runner/recorded_run.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint_meta.h"
#include "engine/error.h"
#include "engine/home.h"
#include "engine/registry.h"
#include "engine/runtime.h"
#include "engine/train/schedule.h"
#include "runner/lineage.h"
#include "engine/load.h"
#include "runner/run_book.h"
#include "storage/store.h"

#include "tfw_commit.h"  // TFW_GIT_COMMIT, stamped at build time (cmake/commit_stamp.cmake)

namespace tfw::runner {

namespace {

namespace fs = std::filesystem;

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

// For --init-from: the checkpoint's [model] may carry state a growth method added (msg's
// [model.msg] mask ramp), which the config does not name. Everything else must match; the run
// then takes the checkpoint's model, state included.
RunConfig adopt_checkpoint_model(const Registry& registry, const RunConfig& given, const RunConfig& stored) {
  const toml::table& mine = *given.resolved["model"].as_table();
  toml::table theirs = *stored.resolved["model"].as_table();
  std::vector<std::string> added;
  for (const auto& [key, value] : theirs) {
    if (!mine.contains(key) && value.is_table()) added.emplace_back(key.str());
  }
  for (const std::string& key : added) theirs.erase(key);
  RunConfig trimmed = stored;
  trimmed.resolved.insert_or_assign("model", theirs);
  check_same_model(given, trimmed);
  if (added.empty()) return given;
  toml::table resolved = given.resolved;
  resolved.insert_or_assign("model", *stored.resolved["model"].as_table());
  return run_config_parse(registry, resolved, given.model.path);
}

// A new run's folder, freed of what an earlier attempt that never checkpointed left.
std::string prepare_new_run(const RunRequest& request, const RunConfig& config, RunBook& book,
                            const RunHooks& hooks) {
  const std::string name = request.name.empty() ? config.model.name : request.name;
  name_check(name, "run name", request.name.empty() ? config.model.path + ": name" : "--name");
  name_check(request.experiment, "experiment name", "--experiment");
  const std::string run_dir = run_dir_of(request.home, request.experiment, name);
  if (!checkpoint_list(run_dir + "/checkpoints").empty()) {
    throw UsageError(with_hint(fmt::format("run '{}' already exists at {}", name, run_dir),
                               fmt::format("continue it with `tfw train --resume {}`, or choose another --name", run_dir)));
  }
  book.clear_name(request.experiment, name, run_dir, hooks.on_message);
  std::error_code ec;
  for (const char* stale : {"/metrics.jsonl", "/config.toml"}) fs::remove(run_dir + stale, ec);
  fs::create_directories(run_dir);
  return run_dir;
}

}  // namespace

RunOutcome run_recorded(const Registry& registry, const RunRequest& request, const std::atomic<bool>* stop,
                        const RunHooks& hooks, std::shared_ptr<DistGroup> dist) {
  std::shared_ptr<RunBook> book = request.book ? request.book : local_run_book(request.home);
  std::int64_t run_id = 0;
  RunConfig config;
  TrainOptions options;
  options.home = request.home;
  if (!request.resume.empty()) {
    std::tie(options.run_dir, run_id) = book->resolve(request.resume, request.home);
    // A run's folder is in its home; a record that names any other folder (one a recording
    // client claimed, issue 33) is never written to: checkpoints, metrics and pruning stay
    // inside TFW_HOME.
    if (!path_inside(options.run_dir, request.home)) {
      throw UsageError(with_hint(fmt::format("run '{}' has its folder at {}, outside this home ({}): tfw writes a "
                                             "run only inside its TFW_HOME",
                                             request.resume, options.run_dir, request.home),
                                 "a run recorded from another machine resumes there, with --record-to"));
    }
    config = train_resume_config(registry, options.run_dir, request.overrides, request.extend);
    if (!request.config.empty()) check_same_model(run_config_load(registry, request.config), config);
    if (dist) config = dist_agree_config(*dist, registry, &config);
    options.resume = true;
  } else {
    if (request.config.empty()) throw UsageError("tfw train needs a CONFIG.toml, or --resume RUN");
    config = run_config_load(registry, request.config, request.overrides);
    if (dist) config = dist_agree_config(*dist, registry, &config);
    // A config that cannot train (no budget, a model that cannot fit in memory) is refused
    // before anything is recorded or replaced.
    train_memory_check(config, train_plan(config));
    if (!request.init_from.empty()) {
      options.init_from = request.init_from;
      if (fs::is_directory(request.init_from)) {  // a folder `tfw grow --out` wrote
        std::optional<std::string> grown = grown_checkpoint(request.init_from);
        if (!grown) {
          throw UsageError(with_hint(fmt::format("--init-from {}: the folder holds no complete checkpoint",
                                                 request.init_from),
                                     "grow into it first (tfw grow --out FOLDER), or name a checkpoint file"));
        }
        options.init_from = *grown;
      }
      // The model must be the checkpoint's; [data] and [train] are the new run's.
      const CheckpointMeta origin = checkpoint_read_meta(options.init_from);
      config = adopt_checkpoint_model(registry, config,
                                      run_config_parse(registry, toml::parse(origin.config_toml, options.init_from),
                                                       options.init_from));
    }
    options.run_dir = prepare_new_run(request, config, *book, hooks);
  }

  // Record the run: a new one (with its lineage), or the resumed one as the same run.
  if (run_id == 0) {
    std::ostringstream config_text;
    config_text << config.resolved;
    RunRecord record;
    record.name = fs::path(options.run_dir).filename().string();
    record.experiment = request.experiment;
    record.family = config.model.family;
    record.config = config_text.str();
    record.seed = static_cast<std::int64_t>(config.train.seed);
    record.git_commit = TFW_GIT_COMMIT;
    record.host = host_name();
    record.parameters = config.model.spec->parameter_count();
    record.run_dir = fs::absolute(options.run_dir).string();
    record.inherited_flops = 0;
    if (!options.init_from.empty()) {
      const LineageSource source = lineage_source(options.init_from);
      run_id = book->create(record, &source);
    } else {
      run_id = book->create(record, nullptr);
    }
  } else {
    // The store's config becomes the one that runs (--set, --extend), from this checkpoint on.
    std::ostringstream config_text;
    config_text << config.resolved;
    const CheckpointInfo latest = checkpoint_latest_valid(options.run_dir + "/checkpoints", nullptr);
    book->resume(run_id, config_text.str(), latest.step);
  }

  book->beat(run_id, true);
  std::int64_t last_tokens = 0;
  double last_flops = 0;
  options.on_metric = [&](const char* key, std::int64_t step, std::int64_t tokens, double flops, double wall,
                          double value) {
    book->metric({run_id, key, step, tokens, flops, wall, value});
    last_tokens = tokens;
    last_flops = flops;
  };
  options.before_checkpoint = [&] { book->flush(); };  // metrics up to a checkpoint are stored before it
  options.on_checkpoint = [&](const std::string& path, std::int64_t step, std::uint32_t crc32, std::uint64_t bytes) {
    book->checkpoint_added({run_id, step, static_cast<std::int64_t>(bytes), fs::absolute(path).string(),
                            fmt::format("crc32:{:08x}", crc32)},
                           last_tokens, last_flops);
  };
  options.on_checkpoint_removed = [&](const std::string& path) {
    book->checkpoint_removed(run_id, fs::absolute(path).string());
  };
  options.on_event = [&](const std::string& kind, std::int64_t step, const std::string& payload) {
    book->event({run_id, step, kind, payload, 0});
  };
  options.provenance = {{"git_commit", TFW_GIT_COMMIT}, {"host", host_name()}};
  options.stop = stop;
  options.dist = dist;
  options.on_message = hooks.on_message;
  options.on_progress = hooks.on_progress;
  if (hooks.on_start) hooks.on_start(config, options.run_dir, options.resume);

  RunOutcome outcome;
  outcome.run_id = run_id;
  outcome.run_dir = options.run_dir;
  outcome.model_name = config.model.name;
  outcome.family = config.model.family;
  outcome.world_size = dist ? dist_world(*dist) : 1;
  const LoadMeter load;  // other processes' share of the CPUs while this run trains
  try {
    outcome.summary = train_run(registry, config, options);
  } catch (const std::exception& e) {
    try {
      book->finish(run_id, RunStatus::failed, last_tokens, last_flops, "{}", e.what());
    } catch (const std::exception& also) {
      if (std::string(also.what()) == e.what()) throw;  // the record's own failure stopped the run
      throw Error(fmt::format("{}\n  and the run could not be recorded as failed: {}", e.what(), also.what()));
    }
    throw;
  }
  const TrainSummary& summary = outcome.summary;
  outcome.other_cpu_share = load.other_cpu_share();
  outcome.contended = load_contended(outcome.other_cpu_share, runtime_threads());
  nlohmann::json final_metrics = {{"train_loss", summary.train_loss}, {"val_loss", summary.val_loss},
                                  {"best_val_loss", summary.best_val_loss}, {"steps", summary.steps},
                                  {"tokens_per_second", summary.tokens_per_second}, {"mfu", summary.mfu},
                                  {"step_seconds", summary.step_seconds}, {"data_seconds", summary.data_seconds},
                                  {"eval_seconds", summary.eval_seconds},
                                  {"checkpoint_seconds", summary.checkpoint_seconds}, {"threads", summary.threads},
                                  {"world_size", summary.world_size}};
  if (summary.world_size > 1) final_metrics["comm_seconds"] = summary.comm_seconds;
  final_metrics["examples"] = summary.examples;
  for (const Metric& m : summary.val_metrics) {
    if (m.headline && std::isfinite(m.value)) final_metrics["val_" + m.key] = m.value;  // val_accuracy
  }
  if (std::isfinite(outcome.other_cpu_share)) {
    final_metrics["other_cpu_share"] = outcome.other_cpu_share;
    final_metrics["contended"] = outcome.contended;
  }
  outcome.status = summary.interrupted ? RunStatus::killed : RunStatus::finished;
  book->finish(run_id, outcome.status, summary.tokens, summary.flops, final_metrics.dump(), "");
  return outcome;
}

}  // namespace tfw::runner
