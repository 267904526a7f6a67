// See batch.h.
#include "runner/batch.h"

#include "engine/config_diff.h"

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

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/checkpoint_meta.h"
#include "engine/error.h"
#include "runner/lineage.h"
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

namespace {

enum class Phase { pending, running, finished, failed, blocked, stopped };

// The parameter blocks [experiment.eval] evaluates `corpus` with on `run`: none given (the
// run's own train.mask.use), or the listed ones the run defines (empty: every token, "all").
std::optional<std::vector<std::string>> eval_blocks(const ExperimentEval& eval, const ExperimentRun& run,
                                                    const std::string& corpus) {
  const std::vector<std::string>* blocks = eval.blocks_for(corpus);
  if (blocks == nullptr || run.config.train.mask.blocks.empty()) return std::nullopt;
  std::vector<std::string> defined;  // the names this run defines (experiment_load checked one is left)
  for (const std::string& name : *blocks) {
    if (run.config.train.mask.block(name) != nullptr) defined.push_back(name);
  }
  return defined;
}

// The `tfw eval` steps of [experiment.eval] for a run: one per distinct blocks setting, each
// on the run's folder (its newest checkpoint, the final one once it has trained).
std::vector<std::vector<std::string>> eval_steps(const Experiment& experiment, const ExperimentRun& run,
                                                 const std::string& experiment_name, const std::string& home) {
  const ExperimentEval& eval = experiment.eval;
  std::vector<std::pair<std::optional<std::vector<std::string>>, std::vector<std::string>>> groups;  // blocks -> corpora
  for (const std::string& corpus : eval.corpora) {
    const std::optional<std::vector<std::string>> blocks = eval_blocks(eval, run, corpus);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == blocks; });
    if (group == groups.end()) group = groups.insert(groups.end(), {blocks, {}});
    group->second.push_back(corpus);
  }
  std::vector<std::vector<std::string>> steps;
  for (const auto& [blocks, corpora] : groups) {
    std::vector<std::string> step = {"eval", run_dir_of(home, experiment_name, run.name)};
    for (const std::string& corpus : corpora) step.insert(step.end(), {"--corpus", corpus});
    if (eval.cloze > 0) step.insert(step.end(), {"--cloze", "--cloze-passages", std::to_string(eval.cloze)});
    if (blocks) step.insert(step.end(), {"--blocks", blocks->empty() ? std::string("all") : fmt::format("{}", fmt::join(*blocks, ","))});
    step.insert(step.end(), {"--home", home});
    steps.push_back(std::move(step));
  }
  return steps;
}

// Whether a finished run lacks an evaluation [experiment.eval] asks for: a corpus's loss with
// the blocks it asks (and its cloze accuracy, with cloze).
bool evaluations_missing(Store& store, std::int64_t run_id, const ExperimentEval& eval, const ExperimentRun& run) {
  if (eval.empty()) return false;
  const std::vector<EvaluationRow> rows = store.evaluations(run_id);
  for (const std::string& corpus : eval.corpora) {
    const std::optional<std::vector<std::string>> asked = eval_blocks(eval, run, corpus);
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

std::string option_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](auto&& value) { out << value; });
  return out.str();
}

// A finished run whose config the file has since changed would be skipped silently, and its
// old numbers read as the new config's: refused before anything runs.
void refuse_changed(Store& store, const Experiment& experiment, const std::vector<const ExperimentRun*>& runs) {
  std::vector<std::string> changed, keys;
  for (const ExperimentRun* run : runs) {
    std::optional<RunRecord> record = store.run_in_experiment(experiment.name, run->name);
    if (!record || record->status != RunStatus::finished) continue;
    try {
      if (toml::parse(record->config) == run->config.resolved) continue;
      std::ostringstream now;
      now << run->config.resolved;
      changed.push_back(run->name);
      // What differs, as the store has it (the config that ran) against the file's.
      for (const ConfigDifference& d : config_differences(record->config, now.str())) {
        keys.push_back(fmt::format("    {}: {} = {} in the store, {} in the file", run->name, d.key,
                                   d.a.empty() ? "(absent)" : d.a, d.b.empty() ? "(absent)" : d.b));
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
  ProgressReader(Store& store, const Experiment& experiment) : store_(store), experiment_(experiment) {}

  RunProgress read(const ExperimentRun& run, bool growing) {
    RunProgress out;
    out.name = run.name;
    out.total_steps = run.plan.total_steps;
    out.phase = "growing";
    if (growing) return out;
    out.phase = "starting";
    std::optional<RunRecord> record = store_.run_in_experiment(experiment_.name, run.name);
    if (!record) return out;
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
    const double rate = s.wall > s.first_wall ? static_cast<double>(s.step - s.first_step) / (s.wall - s.first_wall) : 0;
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
  const Experiment& experiment_;
  std::map<std::string, Seen> seen_;
};

}  // namespace

BatchResult batch_execute(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs,
                          Executor& executor, const BatchOptions& options) {
  auto say = [&](const std::string& line) {
    if (options.on_message) options.on_message(line);
  };
  BatchResult result;
  result.runs = runs.size();
  result.work_dir = options.home + "/experiments/" + experiment.name;
  const std::string& work = result.work_dir;
  fs::create_directories(work);
  std::unique_ptr<Store> store = Store::open(options.home + "/runs.db");
  store->experiment_ensure(experiment.name, fs::absolute(experiment.path).string());
  refuse_changed(*store, experiment, runs);

  std::map<std::string, Phase> phase;
  std::map<std::string, const ExperimentRun*> by_name;
  std::set<std::string> evaluate_only;  // finished runs whose evaluations are missing
  for (const ExperimentRun* run : runs) {
    by_name[run->name] = run;
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, run->name);
    phase[run->name] = record && record->status == RunStatus::finished ? Phase::finished : Phase::pending;
    if (phase[run->name] != Phase::finished) continue;
    if (options.record_arguments.empty() && evaluations_missing(*store, record->id, experiment.eval, *run)) {
      phase[run->name] = Phase::pending;  // trained: only its [experiment.eval] is left
      evaluate_only.insert(run->name);
      say(fmt::format("{}: finished before; evaluating it ([experiment.eval])", run->name));
    } else {
      say(fmt::format("{}: finished before, skipped", run->name));
    }
  }

  auto plain_task_for = [&](const ExperimentRun& run) {
    const std::string config_path = work + "/" + run.name + ".toml";
    std::ofstream(config_path) << "# generated by tfw run from " << experiment.path << "\n" << run.config_toml << "\n";
    Task task;
    task.name = run.name;
    task.log_path = work + "/" + run.name + ".log";
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, run.name);
    const std::vector<std::string> train = {"train",        config_path,     "--name", run.name,
                                            "--experiment", experiment.name, "--home", options.home};
    if (record && !checkpoint_list(record->run_dir + "/checkpoints").empty()) {
      // killed, crashed or failed before: continue it as the same run (one that never
      // checkpointed starts again, and tfw train replaces its record)
      say(fmt::format("{}: {} before, resuming", run.name, status_name(record->status)));
      task.steps.push_back({"train", "--resume", std::to_string(record->id), "--home", options.home});
      return task;
    }
    if (run.parent.empty()) {
      task.steps.push_back(train);
      return task;
    }
    const std::string grown = grown_dir(work, run.name);
    if (!grown_checkpoint(grown)) {
      std::vector<std::string> grow = {"grow", "--method", run.growth_method, "--to", config_path, "--out", grown,
                                       "--home", options.home};
      if (executor.schedules_dependencies()) {
        // The parent may not have trained yet: the step finds its last checkpoint when it runs.
        grow.insert(grow.end(), {"--from-run", experiment.name + "/" + run.parent});
      } else {
        std::optional<RunRecord> parent = store->run_in_experiment(experiment.name, run.parent);
        const std::string from = parent ? last_checkpoint(*store, parent->id) : "";
        if (from.empty()) throw Error(fmt::format("{}: its parent {} has no checkpoint to grow from", run.name, run.parent));
        grow.insert(grow.end(), {"--from", from});
      }
      for (const auto& [key, value] : run.growth_options) {
        grow.insert(grow.end(), {"--option", fmt::format("{}={}", key.str(), option_text(value))});
      }
      task.steps.push_back(grow);
    }
    std::vector<std::string> train_grown = train;
    train_grown.insert(train_grown.end(), {"--init-from", grown});  // the folder: lineage finds its checkpoint
    task.steps.push_back(train_grown);
    return task;
  };

  // The steps of one run: resume it, or grow it from its parent and train it, or train it.
  auto task_for = [&](const ExperimentRun& run) {
    Task task;
    if (evaluate_only.count(run.name)) {
      task.name = run.name;
      task.log_path = work + "/" + run.name + ".log";
    } else {
      task = plain_task_for(run);
    }
    for (std::vector<std::string>& step : task.steps) {
      step.insert(step.end(), options.record_arguments.begin(), options.record_arguments.end());
    }
    // Recording to a service, the evaluations (kept in this home's store) are left out.
    if (options.record_arguments.empty()) {
      for (std::vector<std::string>& step : eval_steps(experiment, run, experiment.name, options.home)) {
        task.steps.push_back(std::move(step));
      }
    }
    return task;
  };

  ProgressReader progress(*store, experiment);
  std::vector<std::string> active;  // submitted, not final
  std::set<std::string> grows;      // tasks whose first step is growth
  bool stopping = false;
  // A cluster may still hold an earlier submission of a run: the executor follows it.
  for (const ExperimentRun* run : runs) {
    if (phase[run->name] != Phase::pending || !executor.adopt(run->name)) continue;
    phase[run->name] = Phase::running;
    active.push_back(run->name);
    result.submitted.push_back(run->name);
    say(fmt::format("{}: still queued or running as {}, not submitted again", run->name, executor.where(run->name)));
  }
  while (true) {
    if (options.stop != nullptr && options.stop->load() && !stopping) {
      stopping = true;
      result.interrupted = true;
      say("tfw run: stopping; the runs checkpoint and can be resumed by running the file again");
      for (const std::string& name : active) executor.cancel(name);
    }
    if (!stopping) {
      std::vector<std::pair<std::string, Task>> round;  // submitted in this round
      for (const ExperimentRun* run : runs) {
        if (active.size() >= executor.capacity()) break;
        if (phase[run->name] != Phase::pending) continue;
        std::string after;
        if (!run->parent.empty()) {
          const Phase parent = phase.count(run->parent) ? phase[run->parent] : Phase::finished;
          if (parent == Phase::failed || parent == Phase::blocked) {
            phase[run->name] = Phase::blocked;
            continue;
          }
          // A cluster back-end holds the child until its parent has succeeded.
          if (parent == Phase::running && executor.schedules_dependencies()) {
            after = run->parent;
          } else if (parent != Phase::finished) {
            continue;
          }
        }
        Task task;
        try {
          task = task_for(*run);
          task.after = after;
          executor.submit(task);
        } catch (const std::exception& e) {
          phase[run->name] = Phase::failed;
          say(fmt::format("{}: failed: {}", run->name, e.what()));
          continue;
        }
        const bool growing = task.steps.front().front() == "grow";
        if (growing) grows.insert(run->name);
        round.emplace_back(run->name, task);
        active.push_back(run->name);
        result.submitted.push_back(run->name);
        phase[run->name] = Phase::running;
      }
      executor.flush();  // a cluster back-end sends the round here (an sbatch refusal is a UsageError)
      for (const auto& [name, task] : round) {
        const bool growing = task.steps.front().front() == "grow";
        const std::string where = executor.where(name);
        const std::string doing = growing ? "growing from " + by_name[name]->parent + ", then training"
                                  : task.steps.front().front() == "eval" ? "evaluating"
                                                                         : "training";
        say(fmt::format("{}: {}{}{} (log {})", name, doing,
                        where.empty() ? "" : ", as " + where,
                        task.after.empty() ? "" : " after " + task.after + " succeeds", task.log_path));
      }
    }
    if (active.empty()) break;
    if (options.detach && !stopping) {
      // Submitted: the cluster runs them; `tfw jobs --slurm` follows them.
      result.detached = true;
      break;
    }
    for (const std::string& name : executor.poll(0.5)) {
      active.erase(std::find(active.begin(), active.end(), name));
      const TaskStatus status = executor.status(name);
      if (status.state == TaskState::succeeded) {
        phase[name] = Phase::finished;
        say(fmt::format("{}: finished", name));
      } else if (status.state == TaskState::cancelled || status.exit_code == 130 || stopping) {
        phase[name] = Phase::stopped;
        say(fmt::format("{}: stopped (exit {})", name, status.exit_code));
      } else {
        phase[name] = Phase::failed;
        say(fmt::format("{}: failed (exit {}); see {}/{}.log", name, status.exit_code, work, name));
      }
    }
    if (options.on_progress && !active.empty()) {
      std::vector<RunProgress> lines;
      for (const std::string& name : active) {
        const bool growing = grows.count(name) && executor.status(name).step == 0;
        lines.push_back(progress.read(*by_name[name], growing));
      }
      options.on_progress(lines);
    }
  }
  for (const ExperimentRun* run : runs) {
    result.finished += phase[run->name] == Phase::finished;
    result.failed += phase[run->name] == Phase::failed;
    result.blocked += phase[run->name] == Phase::blocked;
    result.stopped += phase[run->name] == Phase::stopped || phase[run->name] == Phase::pending;
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, run->name);
    if (!record) continue;
    const nlohmann::json metrics = nlohmann::json::parse(record->final_metrics, nullptr, false);
    if (metrics.is_object() && metrics.value("contended", false)) {
      result.contended.push_back(fmt::format("contention: other processes used {:.0f}% of the CPUs while {} trained; "
                                             "its times are not comparable with a run on an idle machine",
                                             100 * metrics.value("other_cpu_share", 0.0), run->name));
    }
  }
  result.summary = fmt::format("experiment {}: {} of {} runs finished, {} failed, {} blocked by a failed parent",
                               experiment.name, result.finished, result.runs, result.failed, result.blocked);
  if (result.detached) {
    result.summary = fmt::format("experiment {}: {} of {} runs submitted to {}, {} finished before",
                                 experiment.name, result.submitted.size(), result.runs, executor.describe(),
                                 result.finished);
    result.stopped = 0;
  }
  return result;
}

}  // namespace tfw::runner
