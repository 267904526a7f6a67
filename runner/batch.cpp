// See batch.h.
#include "runner/batch.h"

#include "engine/config/config_diff.h"

#include <fnmatch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/error.h"
#include "runner/batch_plan.h"
#include "runner/lineage.h"
#include "runner/run_lock.h"
#include "storage/store.h"

namespace tfw::runner {

namespace fs = std::filesystem;

std::vector<const ExperimentRun*> batch_select(const Experiment& experiment, const std::string& only) {
  std::map<std::string, const ExperimentRun*> by_name;
  for (const ExperimentRun& run : experiment.runs) by_name[run.name] = &run;
  std::set<std::string> keep;
  for (const ExperimentRun& run : experiment.runs) {
    if (!only.empty() && fnmatch(only.c_str(), run.name.c_str(), 0) != 0) continue;
    for (const ExperimentRun* r = &run; r != nullptr; r = r->parent.empty() ? nullptr : by_name[r->parent]) {
      keep.insert(r->name);
    }
  }
  std::vector<const ExperimentRun*> out;
  for (const ExperimentRun& run : experiment.runs) {
    if (keep.count(run.name)) out.push_back(&run);
  }
  if (out.empty()) throw UsageError(fmt::format("--only '{}' matches no run of {}", only, experiment.path));
  return out;
}

std::vector<const ExperimentRun*> batch_select_unit(const Experiment& experiment, const std::string& unit) {
  const ExperimentUnit& u = experiment.unit(unit);
  const std::set<std::string> names(u.runs.begin(), u.runs.end());
  std::vector<const ExperimentRun*> out;
  for (const ExperimentRun& run : experiment.runs) {
    if (names.count(run.name)) out.push_back(&run);
  }
  return out;
}

namespace {

// The error a failed step printed last ("tfw: ..." and its hint), from its log, for the
// batch's own output: the reason on the console, not only in the log.
std::string error_line_of(const std::string& log) {
  std::ifstream in(log);
  std::string line, error;
  bool in_error = false;
  while (std::getline(in, line)) {
    if (line.rfind("tfw: ", 0) == 0) {
      error = line.substr(5);
      in_error = true;
    } else if (in_error && line.rfind("  hint: ", 0) == 0) {
      error += " (" + line.substr(2) + ")";
      in_error = false;
    } else {
      in_error = false;
    }
  }
  return error.size() > 600 ? error.substr(0, 600) + "..." : error;
}

enum class Phase { pending, running, finished, failed, blocked, stopped };

// The experiment's run records, read in one query when the batch starts and again after each
// poll in which a task ended or a running run had no record yet.
class BatchRecords {
 public:
  BatchRecords(Store& store, const std::string& experiment) : store_(store) {
    filter_.experiment = experiment;
    refresh();
  }
  void refresh() {
    by_name_.clear();
    for (RunRecord& record : store_.runs(filter_)) by_name_[record.name] = std::move(record);
  }
  const RunRecord* find(const std::string& name) const {
    auto found = by_name_.find(name);
    return found == by_name_.end() ? nullptr : &found->second;
  }
  std::optional<RunRecord> get(const std::string& name) const {
    const RunRecord* record = find(name);
    return record ? std::optional<RunRecord>(*record) : std::nullopt;
  }

 private:
  Store& store_;
  RunFilter filter_;
  std::map<std::string, RunRecord> by_name_;
};

// Whether a finished run lacks an evaluation [experiment.eval] asks for: a corpus's loss with
// the blocks it asks (and its cloze accuracy, with cloze).
bool evaluations_missing(Store& store, std::int64_t run_id, const ExperimentEval& eval, const ExperimentRun& run) {
  if (eval.empty()) return false;
  const std::vector<EvaluationRow> rows = store.evaluations(run_id);
  for (const std::string& corpus : eval.corpora) {
    const std::optional<std::vector<std::string>> asked = batch_eval_blocks(eval, run, corpus);
    const std::string blocks = mask_label(asked ? *asked : run.config.train.mask.use);
    for (const char* metric : {"loss", "cloze_accuracy"}) {
      if (std::string(metric) == "cloze_accuracy" && eval.cloze == 0) continue;
      const bool found = std::any_of(rows.begin(), rows.end(), [&](const EvaluationRow& r) {
        return r.corpus == corpus && r.metric == metric && r.blocks == blocks;
      });
      if (!found) return true;
    }
  }
  return false;
}

// A finished run whose config the file has since changed would be skipped silently, and its
// old numbers read as the new config's: refused before anything runs. A grown stage's growth
// options are part of its config (a growth script's SHA-256 among them).
void refuse_changed(const BatchRecords& records, const Experiment& experiment,
                    const std::vector<const ExperimentRun*>& runs) {
  std::vector<std::string> changed, keys;
  for (const ExperimentRun* run : runs) {
    const RunRecord* record = records.find(run->name);
    if (record == nullptr || record->status != RunStatus::finished) continue;
    try {
      const bool same_config = config_identity(toml::parse(record->config)) == config_identity(run->config);
      // (A record that names no growth, from before growths were recorded, has nothing to compare.)
      const bool same_growth =
          run->parent.empty() || record->growth_method.empty() ||
          (record->growth_method == run->growth_method &&
           config_identity(toml::parse(record->growth_options)) == config_identity(run->growth_options));
      if (same_config && same_growth) continue;
      changed.push_back(run->name);
      // What differs, as the store has it (the config that ran) against the file's.
      auto name = [&](const ConfigDifference& d, const std::string& prefix) {
        keys.push_back(fmt::format("    {}: {}{} = {} in the store, {} in the file", run->name, prefix, d.key,
                                   d.a.empty() ? "(absent)" : d.a, d.b.empty() ? "(absent)" : d.b));
      };
      for (const ConfigDifference& d : config_differences(record->config, run_config_text(run->config))) name(d, "");
      if (!same_growth && record->growth_method != run->growth_method)
        name({"method", record->growth_method, run->growth_method}, "growth.");
      if (!same_growth) {
        toml::table growth = run->growth_options;
        growth.is_inline(false);  // as the store writes it: an inline table would print as `{ ... }`
        std::ostringstream growth_text;
        growth_text << growth;
        for (const ConfigDifference& d : config_differences(record->growth_options, growth_text.str()))
          name(d, "growth.options.");
      }
    } catch (const std::exception&) {
      changed.push_back(run->name);
    }
  }
  if (changed.empty()) return;
  throw UsageError(with_hint(
      fmt::format("{} finished run{} of experiment {} ha{} a different config in the store than in {} now: {}\n{}",
                  changed.size(), changed.size() == 1 ? "" : "s", experiment.name, changed.size() == 1 ? "s" : "ve",
                  experiment.path, fmt::join(changed, ", "), fmt::join(keys, "\n")),
      "to re-run them with the file's config, delete the old ones first (tfw runs delete NAME... --files); to keep "
      "both, give the changed entries new names"));
}

// Where each running run is (step, loss, tokens/s, ETA), read from the store.
class ProgressReader {
 public:
  ProgressReader(Store& store, const BatchRecords& records) : store_(store), records_(records) {}

  RunProgress read(const ExperimentRun& run, bool growing) {
    RunProgress out;
    out.name = run.name;
    out.total_steps = run.plan.total_steps;
    out.phase = "growing";
    if (growing) return out;
    out.phase = "starting";
    const RunRecord* record = records_.find(run.name);
    if (record == nullptr) return out;
    Seen& s = seen_[run.name];
    for (const MetricPoint& p : store_.news(record->id, s.cursor).points) {
      if (p.key != "train/loss" || p.step < s.step) continue;
      if (s.first_step < 0) {
        s.first_step = p.step;
        s.first_wall = p.wall;
      }
      s.step = p.step;
      s.loss = p.value;
      s.wall = p.wall;
    }
    out.phase = "preparing";
    if (s.step < 0) return out;
    out.phase = "training";
    const double rate =
        s.wall > s.first_wall ? static_cast<double>(s.step - s.first_step) / (s.wall - s.first_wall) : 0;
    out.step = s.step;  // a train/loss point's step counts the steps done
    out.loss = s.loss;
    out.tokens_per_second = rate * static_cast<double>(run.plan.tokens_per_step);
    if (rate > 0) out.eta_seconds = static_cast<double>(out.total_steps - out.step) / rate;
    return out;
  }

 private:
  struct Seen {
    RunCursor cursor;
    std::int64_t step = -1, first_step = -1;
    double loss = std::nan(""), first_wall = 0, wall = 0;
  };
  Store& store_;
  const BatchRecords& records_;
  std::map<std::string, Seen> seen_;
};

// One batch: the runs' phases, planned task by task, driven through the executor.
class Batch {
 public:
  Batch(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs, Executor& executor,
        const BatchOptions& options);
  BatchResult run();

 private:
  void skip_finished();
  void adopt();
  void stop();
  void submit_round();
  bool submit(const ExperimentRun& run);
  std::optional<std::string> ready(const ExperimentRun& run);
  RunFacts facts_of(const ExperimentRun& run) const;
  void wait_for(const std::string& name, const std::string& who) {  // said once per wait
    if (waiting_.insert(name).second) say(fmt::format("{}: another process ({}) trains it; waiting", name, who));
  }
  std::string held_elsewhere(const std::string& name) {
    const RunRecord* record = records_->find(name);
    return RunLock::holder(record ? record->run_dir : run_dir_of(settings_.home, experiment_.name, name));
  }
  bool finished_elsewhere(const std::string& name) {
    records_->refresh();
    const RunRecord* record = records_->find(name);
    return record != nullptr && record->status == RunStatus::finished && !evaluate_only_.count(name);
  }
  void poll();
  void report_progress();
  void tally();
  void say(const std::string& line) const {
    if (options_.on_message) options_.on_message(line);
  }

  const Experiment& experiment_;
  const std::vector<const ExperimentRun*>& runs_;
  Executor& executor_;
  const BatchOptions& options_;
  BatchResult result_;
  BatchSettings settings_;
  std::unique_ptr<Store> store_;
  std::optional<BatchRecords> records_;
  std::optional<ProgressReader> progress_;
  std::map<std::string, Phase> phase_;
  std::map<std::string, const ExperimentRun*> by_name_;
  std::set<std::string> evaluate_only_;  // finished runs whose evaluations are missing
  std::set<std::string> waiting_;        // runs another process holds (run_lock.h)
  struct Submitted {
    RunPlan plan;
    std::string after;  // the task it waits for ("" : none)
  };
  std::map<std::string, Submitted> submitted_;  // the plans of the submitted tasks
  std::vector<std::string> active_;             // submitted, not final
  bool stopping_ = false;
};

Batch::Batch(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs, Executor& executor,
             const BatchOptions& options)
    : experiment_(experiment), runs_(runs), executor_(executor), options_(options) {
  result_.runs = runs.size();
  result_.work_dir = options.home + "/experiments/" + experiment.name;
  settings_ = {options.home, result_.work_dir, options.record_arguments, executor.schedules_dependencies()};
  fs::create_directories(result_.work_dir);
  store_ = Store::open(options.home + "/runs.db");
  store_->experiment_ensure(experiment.name, fs::absolute(experiment.path).string());
  records_.emplace(*store_, experiment.name);
  progress_.emplace(*store_, *records_);
  for (const ExperimentRun* run : runs) by_name_[run->name] = run;
}

BatchResult Batch::run() {
  refuse_changed(*records_, experiment_, runs_);
  skip_finished();
  adopt();
  while (true) {
    if (options_.stop != nullptr && options_.stop->load() && !stopping_) stop();
    if (!stopping_) submit_round();
    if (active_.empty() && (waiting_.empty() || stopping_)) break;
    if (active_.empty()) {  // only runs that other processes train: look again in a moment
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if (options_.detach && !stopping_) {
      // Submitted: the cluster runs them; `tfw jobs --slurm` follows them.
      result_.detached = true;
      break;
    }
    poll();
    report_progress();
  }
  tally();
  return result_;
}

// Finished runs are skipped, or only evaluated when [experiment.eval] asks for more.
void Batch::skip_finished() {
  for (const ExperimentRun* run : runs_) {
    const RunRecord* record = records_->find(run->name);
    const bool finished = record != nullptr && record->status == RunStatus::finished;
    phase_[run->name] = finished ? Phase::finished : Phase::pending;
    if (!finished) continue;
    if (options_.record_arguments.empty() && evaluations_missing(*store_, record->id, experiment_.eval, *run)) {
      phase_[run->name] = Phase::pending;  // trained: only its [experiment.eval] is left
      evaluate_only_.insert(run->name);
      say(fmt::format("{}: finished before; evaluating it ([experiment.eval])", run->name));
    } else {
      say(fmt::format("{}: finished before, skipped", run->name));
    }
  }
}

// A cluster may still hold an earlier submission of a run: the executor follows it.
void Batch::adopt() {
  for (const ExperimentRun* run : runs_) {
    if (phase_[run->name] != Phase::pending || !executor_.adopt(run->name)) continue;
    phase_[run->name] = Phase::running;
    active_.push_back(run->name);
    result_.submitted.push_back(run->name);
    say(fmt::format("{}: still queued or running as {}, not submitted again", run->name, executor_.where(run->name)));
  }
}

void Batch::stop() {
  stopping_ = true;
  result_.interrupted = true;
  say("tfw run: stopping; the runs checkpoint and can be resumed by running the file again");
  for (const std::string& name : active_) executor_.cancel(name);
}

// What the plan needs to know of a run, from the records and the file system.
RunFacts Batch::facts_of(const ExperimentRun& run) const {
  RunFacts facts;
  facts.record = records_->get(run.name);
  facts.evaluate_only = evaluate_only_.count(run.name) > 0;
  facts.has_checkpoint = facts.record && !checkpoint_list(facts.record->run_dir + "/checkpoints").empty();
  if (!run.parent.empty()) {
    facts.grown = grown_checkpoint(grown_dir(settings_.work_dir, run.name)).has_value();
    const RunRecord* parent = records_->find(run.parent);
    if (parent != nullptr && !facts.grown && !settings_.schedules_dependencies)
      facts.parent_checkpoint = last_checkpoint(*store_, parent->id);
  }
  return facts;
}

// Whether a pending run can be submitted now: "" to go, the parent's name to go after it
// succeeds (a cluster back-end holds the child), nothing to wait (or, blocked, never).
std::optional<std::string> Batch::ready(const ExperimentRun& run) {
  if (run.parent.empty()) return std::string();
  const Phase parent = phase_.count(run.parent) ? phase_[run.parent] : Phase::finished;
  if (parent == Phase::failed || parent == Phase::blocked) {
    phase_[run.name] = Phase::blocked;
    return std::nullopt;
  }
  if (parent == Phase::running && settings_.schedules_dependencies) return run.parent;
  if (parent != Phase::finished) return std::nullopt;
  return std::string();
}

// Plans a run and submits its task; false if planning or submitting failed (the run fails).
bool Batch::submit(const ExperimentRun& run) {
  const std::optional<std::string> after = ready(run);
  if (!after) return false;
  RunPlan plan;
  Task task;
  try {
    // Another process (a second batch of this file in this home) may train this run now, or
    // have finished it meanwhile: wait for it, then skip it, rather than fail it.
    const RunRecord* known = records_->find(run.name);
    const std::string who =
        RunLock::holder(known ? known->run_dir : run_dir_of(settings_.home, experiment_.name, run.name));
    if (!who.empty()) {
      wait_for(run.name, who);
      return false;
    }
    waiting_.erase(run.name);
    records_->refresh();  // what the store says now, not when the batch began
    const RunFacts facts = facts_of(run);
    if (facts.record && facts.record->status == RunStatus::finished && !facts.evaluate_only) {
      phase_[run.name] = Phase::finished;
      say(fmt::format("{}: finished meanwhile by another process, skipped", run.name));
      return false;
    }
    plan = batch_plan_run(experiment_, run, facts, settings_);
    if (!facts.evaluate_only) {
      std::ofstream(plan.config_path) << "# generated by tfw run from " << experiment_.path << "\n"
                                      << run.config_toml << "\n";
    }
    if (!plan.note.empty()) say(plan.note);
    task = {run.name, plan.argv(), settings_.work_dir + "/" + run.name + ".log", *after};
    executor_.submit(task);
  } catch (const std::exception& e) {
    phase_[run.name] = Phase::failed;
    say(fmt::format("{}: failed: {}", run.name, e.what()));
    return false;
  }
  submitted_[run.name] = {std::move(plan), *after};
  active_.push_back(run.name);
  if (std::find(result_.submitted.begin(), result_.submitted.end(), run.name) == result_.submitted.end()) {
    result_.submitted.push_back(run.name);  // once, also when it waited for another process and went again
  }
  phase_[run.name] = Phase::running;
  return true;
}

// Submits every pending run whose parent allows it, up to the executor's capacity, then says
// what each one does.
void Batch::submit_round() {
  std::vector<std::string> round;
  for (const ExperimentRun* run : runs_) {
    if (active_.size() >= executor_.capacity()) break;
    if (phase_[run->name] == Phase::pending && submit(*run)) round.push_back(run->name);
  }
  executor_.flush();  // a cluster back-end sends the round here (an sbatch refusal is a UsageError)
  for (const std::string& name : round) {
    const Submitted& task = submitted_[name];
    const std::string where = executor_.where(name);
    const StepKind first = task.plan.first();
    const std::string doing = first == StepKind::grow   ? "growing from " + by_name_[name]->parent + ", then training"
                              : first == StepKind::eval ? "evaluating"
                                                        : "training";
    say(fmt::format("{}: {}{}{} (log {}/{}.log)", name, doing, where.empty() ? "" : ", as " + where,
                    task.after.empty() ? "" : " after " + task.after + " succeeds", settings_.work_dir, name));
  }
}

// The tasks that ended: finished, stopped (cancelled, or a step that checkpointed and exited
// kExitStopped) or failed. The records are read again when one ended or a running run has none yet.
void Batch::poll() {
  const std::vector<std::string> ended = executor_.poll(0.5);
  for (const std::string& name : ended) {
    active_.erase(std::find(active_.begin(), active_.end(), name));
    const TaskStatus status = executor_.status(name);
    if (status.state == TaskState::succeeded) {
      phase_[name] = Phase::finished;
      say(fmt::format("{}: finished", name));
    } else if (status.state == TaskState::cancelled || status.exit_code == kExitStopped || stopping_) {
      phase_[name] = Phase::stopped;
      say(fmt::format("{}: stopped (exit {})", name, status.exit_code));
    } else if (const std::string who = held_elsewhere(name); !who.empty()) {
      phase_[name] = Phase::pending;  // another process took it first: wait for it, then look again
      wait_for(name, who);
    } else if (finished_elsewhere(name)) {
      // Its step failed because another process (a second batch of this file) trained the
      // run in the meantime, between this batch's look and its step's start.
      phase_[name] = Phase::finished;
      say(fmt::format("{}: finished meanwhile by another process", name));
    } else {
      phase_[name] = Phase::failed;
      const std::string log = fmt::format("{}/{}.log", settings_.work_dir, name);
      const std::string why = error_line_of(log);
      say(fmt::format("{}: failed (exit {}){}; see {}", name, status.exit_code, why.empty() ? "" : ": " + why, log));
    }
  }
  const bool unrecorded = std::any_of(active_.begin(), active_.end(),
                                      [&](const std::string& name) { return records_->find(name) == nullptr; });
  if (!ended.empty() || unrecorded) records_->refresh();
}

void Batch::report_progress() {
  if (!options_.on_progress || active_.empty()) return;
  std::vector<RunProgress> lines;
  for (const std::string& name : active_) {
    const bool growing =
        submitted_.count(name) && submitted_[name].plan.first() == StepKind::grow && executor_.status(name).step == 0;
    lines.push_back(progress_->read(*by_name_[name], growing));
  }
  options_.on_progress(lines);
}

// The counts, the contention notes of the runs' records, and the summary line.
void Batch::tally() {
  records_->refresh();
  for (const ExperimentRun* run : runs_) {
    const Phase phase = phase_[run->name];
    result_.finished += phase == Phase::finished;
    result_.failed += phase == Phase::failed;
    result_.blocked += phase == Phase::blocked;
    result_.stopped += phase == Phase::stopped || phase == Phase::pending;
    const RunRecord* record = records_->find(run->name);
    if (record == nullptr) continue;
    const FinalMetrics& metrics = record->final_metrics;
    if (metrics.flag("contended")) {
      result_.contended.push_back(
          fmt::format("contention: other processes used {:.0f}% of the CPUs while {} trained; "
                      "its times are not comparable with a run on an idle machine",
                      100 * metrics.number("other_cpu_share").value_or(0.0), run->name));
    }
  }
  result_.summary = fmt::format("experiment {}: {} of {} runs finished, {} failed, {} blocked by a failed parent",
                                experiment_.name, result_.finished, result_.runs, result_.failed, result_.blocked);
  if (result_.detached) {
    result_.summary = fmt::format("experiment {}: {} of {} runs submitted to {}, {} finished before", experiment_.name,
                                  result_.submitted.size(), result_.runs, executor_.describe(), result_.finished);
    result_.stopped = 0;
  }
}

}  // namespace

BatchResult batch_execute(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs,
                          Executor& executor, const BatchOptions& options) {
  return Batch(experiment, runs, executor, options).run();
}

}  // namespace tfw::runner
