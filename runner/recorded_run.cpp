// See recorded_run.h.
#include "runner/recorded_run.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/data/stored_paths.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "engine/machine/runtime.h"
#include "engine/train/profile.h"
#include "engine/config/schedule.h"
#include "engine/machine/memory_check.h"
#include "runner/lineage.h"
#include "engine/machine/cpu_load.h"
#include "runner/run_book.h"
#include "runner/run_lock.h"
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

// The model tables are compared by identity, as TOML values (an integer is not a float), not as
// text. `stored_model` is the stored run's [model] table.
void check_same_model(const RunConfig& given, const RunConfig& stored, const toml::table& stored_model) {
  if (given.model.family != stored.model.family ||
      config_identity(given.model.spec->to_toml()) != config_identity(stored_model)) {
    throw UsageError(with_hint(
        fmt::format("{} does not fit the checkpoint: its model is {} ({}), the run's is {} ({})", given.model.path,
                    given.model.spec->summary(), given.model.family, stored.model.spec->summary(), stored.model.family),
        "resume without a config (the run's own is used), or start a new run"));
  }
}

void check_same_model(const RunConfig& given, const RunConfig& stored) {
  check_same_model(given, stored, stored.model.spec->to_toml());
}

// For --init-from: the checkpoint's [model] may carry state a growth method added (msg's
// [model.msg] mask ramp), which the config does not name. Everything else must match; the run
// then takes the checkpoint's model, state included.
RunConfig adopt_checkpoint_model(const Registry& registry, const RunConfig& given, const RunConfig& stored) {
  const toml::table mine = given.model.spec->to_toml();
  const toml::table stored_model = stored.model.spec->to_toml();
  toml::table theirs = stored_model;
  std::vector<std::string> added;
  for (const auto& [key, value] : theirs) {
    if (!mine.contains(key) && value.is_table()) added.emplace_back(key.str());
  }
  for (const std::string& key : added) theirs.erase(key);
  check_same_model(given, stored, theirs);
  if (added.empty()) return given;
  toml::table adopted = run_config_to_toml(given);
  adopted.insert_or_assign("model", stored_model);
  return run_config_parse(registry, adopted, given.model.path);
}

// A new run's folder, freed of what an earlier attempt that never checkpointed left.
std::string prepare_new_run(const RunRequest& request, const RunConfig& config, RunBook& book, const RunHooks& hooks,
                            std::unique_ptr<RunLock>& lock) {
  const std::string name = request.name.empty() ? config.model.name : request.name;
  name_check(name, "run name", request.name.empty() ? config.model.path + ": name" : "--name");
  name_check(request.experiment, "experiment name", "--experiment");
  const std::string run_dir = run_dir_of(request.home, request.experiment, name);
  // Held from here to the end of the run: another process that reaches the same run (a second
  // batch of the same file in this home) is refused, not interleaved with this one.
  lock = RunLock::hold(run_dir, fmt::format("'{}'", name));
  if (!checkpoint_list(run_dir + "/checkpoints").empty()) {
    throw UsageError(
        with_hint(fmt::format("run '{}' already exists at {}", name, run_dir),
                  fmt::format("continue it with `tfw train --resume {}`, or choose another --name", run_dir)));
  }
  book.clear_name(request.experiment, name, run_dir, hooks.on_message);
  std::error_code ec;
  for (const char* stale : {"/metrics.jsonl", "/config.toml"}) fs::remove(run_dir + stale, ec);
  fs::create_directories(run_dir);
  return run_dir;
}

// A run to resume: its folder, store id and the step of its newest valid checkpoint (into
// `options`, `run_id` and `done`), and the config it continues with.
RunConfig resumed_run_config(const Registry& registry, const RunRequest& request, RunBook& book,
                             const std::shared_ptr<DistGroup>& dist, TrainOptions& options, std::int64_t& run_id,
                             std::int64_t& done, std::unique_ptr<RunLock>& lock) {
  std::tie(options.run_dir, run_id) = book.resolve(request.resume, request.home);
  // A run's folder is in its home; a record that names any other folder (one a recording
  // client claimed) is never written to: checkpoints, metrics and pruning stay
  // inside TFW_HOME.
  if (!path_inside(options.run_dir, request.home)) {
    throw UsageError(with_hint(fmt::format("run '{}' has its folder at {}, outside this home ({}): tfw writes a "
                                           "run only inside its TFW_HOME",
                                           request.resume, options.run_dir, request.home),
                               "a run recorded from another machine resumes there, with --record-to"));
  }
  // One process trains a run: a second resume, or a delete, waits its turn by refusal. The
  // record is looked up again under the lock: a delete that won the race leaves nothing to resume.
  lock = RunLock::hold(options.run_dir, fmt::format("'{}'", request.resume));
  std::int64_t still = 0;
  try {
    still = book.resolve(request.resume, request.home).second;
  } catch (const UsageError&) {}
  if (still != run_id) {
    throw UsageError(
        with_hint(fmt::format("run '{}' was deleted while this resume started; nothing was trained", request.resume),
                  "start it again from its config"));
  }
  RunConfig config = train_resume_config(registry, options.run_dir, request.overrides, request.extend);
  // Its [data] comes from its checkpoint (an imported bundle's, perhaps): read only inside the home.
  stored_config_check(config, request.home, fmt::format("run '{}''s stored config", request.resume));
  if (!request.config.empty()) check_same_model(run_config_load(registry, request.config), config);
  // A run that trained its whole budget has nothing to resume: training "zero steps" would
  // rewrite its record (its wall time, tokens/s and MFU) with nothing measured.
  CheckpointMeta latest;
  done = checkpoint_latest_valid(options.run_dir + "/checkpoints", nullptr, &latest).step;
  // ATen's CPU kernels are chosen at its first kernel, which has not run yet: the run's own,
  // as it keeps its thread count (the trainer says what it got, engine/train/resume.cpp).
  if (!config.train.device.is_cuda()) cpu_capability_keep(latest.cpu_capability);
  options.micro_batch = latest.micro_batch;  // train.grad_accum = "auto": the split it trains with
  const std::int64_t budget = train_plan(config).total_steps;
  if (done >= budget) {
    throw UsageError(with_hint(fmt::format("run '{}' has trained all {} steps of its budget (its last checkpoint is "
                                           "step {}): resuming would train nothing, and its record stays as it is",
                                           request.resume, budget, done),
                               "to train it further, raise its budget: `tfw train --resume RUN --set "
                               "train.max_steps=N --extend keep` (or stretch); to score it, `tfw eval RUN`"));
  }
  if (dist) config = dist_agree_config(*dist, registry, &config);
  refuse_auto_split_with_ranks(config, dist != nullptr);  // before anything is recorded
  options.resume = true;
  return config;
}

// The checkpoint --init-from names: the file itself, or the newest complete checkpoint of a
// folder.
std::string init_from_checkpoint(const std::string& init_from) {
  if (fs::is_directory(init_from)) {  // a folder `tfw grow --out` wrote
    std::optional<std::string> grown = grown_checkpoint(init_from);
    if (!grown) {
      throw UsageError(with_hint(fmt::format("--init-from {}: the folder holds no complete checkpoint", init_from),
                                 "grow into it first (tfw grow --out FOLDER), or name a checkpoint file"));
    }
    return *grown;
  }
  return init_from;
}

// A new run: its config (with the model of the checkpoint it starts from, --init-from) and its
// folder, prepared (into `options`).
RunConfig new_run_config(const Registry& registry, const RunRequest& request, RunBook& book, const RunHooks& hooks,
                         const std::shared_ptr<DistGroup>& dist, TrainOptions& options,
                         std::unique_ptr<RunLock>& lock) {
  if (request.config.empty()) throw UsageError("tfw train needs a CONFIG.toml, or --resume RUN");
  RunConfig config = run_config_load(registry, request.config, request.overrides);
  if (dist) config = dist_agree_config(*dist, registry, &config);
  refuse_auto_split_with_ranks(config, dist != nullptr);  // before anything is recorded
  // A config that cannot train (no budget, a model that cannot fit in memory, a corpus that
  // does not exist) is refused before anything is recorded or replaced.
  train_memory_check(config, train_plan(config));
  data_preflight(config, request.home);
  if (!request.init_from.empty()) {
    options.init_from = init_from_checkpoint(request.init_from);
    // The model must be the checkpoint's; [data] and [train] are the new run's.
    const CheckpointMeta origin = checkpoint_read_meta(options.init_from);
    config = adopt_checkpoint_model(registry, config, checkpoint_run_config(registry, origin, options.init_from));
  }
  options.run_dir = prepare_new_run(request, config, book, hooks, lock);
  return config;
}

// Records a new run, with its lineage when it starts from a checkpoint: its store id.
std::int64_t record_new_run(RunBook& book, const RunRequest& request, const RunConfig& config,
                            const TrainOptions& options) {
  RunRecord record;
  record.name = fs::path(options.run_dir).filename().string();
  record.experiment = request.experiment;
  record.family = config.model.family;
  record.config = run_config_text(config);
  record.seed = static_cast<std::int64_t>(config.train.seed);
  record.git_commit = TFW_GIT_COMMIT;
  record.host = host_name();
  record.parameters = config.model.spec->parameter_count();
  record.run_dir = fs::absolute(options.run_dir).string();
  record.inherited_flops = 0;
  if (!options.init_from.empty()) {
    const LineageSource source = lineage_source(options.init_from);
    return book.create(record, &source);
  }
  return book.create(record, nullptr);
}

// The run's record as the trainer's observer: metrics, checkpoints and events go to the run
// book (the store here, or a service); progress and messages to the caller's hooks. It keeps
// the tokens and FLOPs last reported, which checkpoint rows and a failed run are recorded with.
class RecordObserver : public RunObserver {
 public:
  RecordObserver(RunBook& book, std::int64_t run_id, const RunHooks& hooks)
      : book_(book), run_id_(run_id), hooks_(hooks) {}
  void metric(const char* key, std::int64_t step, std::int64_t tokens, double flops, double wall,
              double value) override {
    book_.metric({run_id_, key, step, tokens, flops, wall, value});
    tokens_ = tokens;
    flops_ = flops;
  }
  void before_checkpoint() override { book_.flush(); }  // metrics up to a checkpoint are stored before it
  void checkpoint(const CheckpointSaved& saved) override {
    book_.checkpoint_added({run_id_, saved.step, static_cast<std::int64_t>(saved.bytes),
                            fs::absolute(saved.path).string(), fmt::format("crc32:{:08x}", saved.crc32)},
                           tokens_, flops_);
  }
  void checkpoint_removed(const std::string& path) override {
    book_.checkpoint_removed(run_id_, fs::absolute(path).string());
  }
  void event(const std::string& kind, std::int64_t step, const std::string& payload) override {
    book_.event({run_id_, step, kind, payload, 0});
  }
  void progress(const TrainProgress& progress) override {
    if (hooks_.on_progress) hooks_.on_progress(progress);
  }
  void message(const std::string& line) override {
    if (hooks_.on_message) hooks_.on_message(line);
  }
  std::int64_t tokens() const { return tokens_; }
  double flops() const { return flops_; }

 private:
  RunBook& book_;
  const std::int64_t run_id_;
  const RunHooks& hooks_;
  std::int64_t tokens_ = 0;
  double flops_ = 0;
};

// The final metrics a finished (or stopped) run is recorded with: its summary's, its headline
// validation metrics, and how busy the machine was while it trained.
nlohmann::json final_metrics_of(const RunOutcome& outcome) {
  const TrainSummary& summary = outcome.summary;
  nlohmann::json final_metrics = {{"train_loss", summary.train_loss},
                                  {"val_loss", summary.val_loss},
                                  {"best_val_loss", summary.best_val_loss},
                                  {"steps", summary.steps},
                                  {"tokens_per_second", summary.tokens_per_second},
                                  {"mfu", summary.mfu},
                                  {"step_seconds", summary.step_seconds},
                                  {"data_seconds", summary.data_seconds},
                                  {"eval_seconds", summary.eval_seconds},
                                  {"checkpoint_seconds", summary.checkpoint_seconds},
                                  {"threads", summary.threads},
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
  return final_metrics;
}

// --profile N needs its warm-up and N steps left (`done` of the budget trained): said before
// anything is recorded.
void profile_check(const RunRequest& request, const RunConfig& config, std::int64_t done) {
  const std::int64_t left = train_plan(config).total_steps - done;
  if (request.profile_steps > 0 && left < request.profile_steps + kProfileWarmupSteps) {
    throw UsageError(with_hint(
        fmt::format("--profile {} needs {} steps ({} of warm-up first), and the run has {} left", request.profile_steps,
                    request.profile_steps + kProfileWarmupSteps, kProfileWarmupSteps, left),
        "profile fewer steps, or raise the budget (--set train.max_steps=N)"));
  }
}

}  // namespace

RunOutcome run_recorded(const Registry& registry, const RunRequest& request, const std::atomic<bool>* stop,
                        const RunHooks& hooks, std::shared_ptr<DistGroup> dist) {
  std::shared_ptr<RunBook> book = request.book ? request.book : local_run_book(request.home);
  std::int64_t run_id = 0, done = 0;  // a resumed run's id and the step it continues from
  TrainOptions options;
  options.home = request.home;
  std::unique_ptr<RunLock> lock;  // the run's, held until this returns (run_lock.h)
  RunConfig config = request.resume.empty()
                         ? new_run_config(registry, request, *book, hooks, dist, options, lock)
                         : resumed_run_config(registry, request, *book, dist, options, run_id, done, lock);
  profile_check(request, config, done);
  options.profile_steps = request.profile_steps;
  // Record the run: a new one (with its lineage), or the resumed one as the same run.
  if (run_id == 0) {
    run_id = record_new_run(*book, request, config, options);
  } else {
    // The store's config becomes the one that runs (--set, --extend), from this checkpoint on.
    book->resume(run_id, run_config_text(config), done);
  }

  book->beat(run_id, true);
  RecordObserver record(*book, run_id, hooks);
  options.observer = &record;
  options.provenance = {{"git_commit", TFW_GIT_COMMIT}, {"host", host_name()}};
  options.stop = stop;
  options.dist = dist;
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
      book->finish(run_id, RunStatus::failed, record.tokens(), record.flops(), "{}", e.what());
    } catch (const std::exception& also) {
      if (std::string(also.what()) == e.what()) throw;  // the record's own failure stopped the run
      throw Error(fmt::format("{}\n  and the run could not be recorded as failed: {}", e.what(), also.what()));
    }
    throw;
  }
  const TrainSummary& summary = outcome.summary;
  outcome.other_cpu_share = load.other_cpu_share();
  outcome.contended = load_contended(outcome.other_cpu_share, runtime_threads());
  outcome.status = summary.interrupted ? RunStatus::killed : RunStatus::finished;
  book->finish(run_id, outcome.status, summary.tokens, summary.flops, final_metrics_of(outcome).dump(), "");
  return outcome;
}

}  // namespace tfw::runner
