// See executor_slurm.h.
#include "runner/executor_slurm.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/core/error.h"
#include "runner/lineage.h"
#include "engine/core/process.h"

namespace tfw::runner {

namespace {

namespace fs = std::filesystem;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string trimmed(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, by)) parts.push_back(part);
  if (!text.empty() && text.back() == by) parts.emplace_back();
  return parts;
}

// A word for bash: single-quoted.
std::string quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// "3:0" -> 3; "0:9" (killed by signal 9) -> 137.
int exit_code_of(const std::string& text) {
  const std::vector<std::string> parts = split(text, ':');
  if (parts.empty()) return -1;
  const int code = std::atoi(parts[0].c_str());
  const int signal = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
  return signal > 0 && code == 0 ? 128 + signal : code;
}

TaskState task_state_of(const std::string& state) {
  if (!slurm_state_final(state)) return state == "PENDING" ? TaskState::pending : TaskState::running;
  if (state == "COMPLETED") return TaskState::succeeded;
  if (state == "CANCELLED") return TaskState::cancelled;
  return TaskState::failed;
}

}  // namespace

bool slurm_state_final(const std::string& state) {
  static const std::set<std::string> live = {"PENDING",     "RUNNING",      "CONFIGURING",   "COMPLETING",  "SUSPENDED",
                                             "REQUEUED",    "RESIZING",     "STOPPED",       "SIGNALING",   "STAGE_OUT",
                                             "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT"};
  return !live.count(state);
}

std::map<std::string, SlurmJobState> slurm_query(const std::vector<std::string>& job_ids) {
  std::map<std::string, SlurmJobState> found;
  if (job_ids.empty()) return found;
  const std::set<std::string> wanted(job_ids.begin(), job_ids.end());
  // 1. squeue: every job the controller still queues or runs, array tasks one per line.
  const CommandOutput queue = command_run({"squeue", "-h", "-r", "-o", "%i|%T|%r"});
  if (queue.code == 127)
    throw UsageError(with_hint("squeue not found", "--executor slurm needs Slurm's commands on PATH"));
  if (queue.code != 0) {
    // The controller cannot be asked now: nothing is known, nothing is concluded.
    throw Error(fmt::format("squeue failed (exit {}): {}", queue.code, trimmed(queue.err + queue.out)));
  }
  for (const std::string& line : split(queue.out, '\n')) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() >= 3 && wanted.count(f[0])) found[f[0]] = {f[1], -1, f[2] == "None" ? "" : f[2]};
  }
  std::vector<std::string> rest;
  for (const std::string& id : job_ids) {
    if (!found.count(id)) rest.push_back(id);
  }
  // 2. sacct, on a cluster that keeps accounting (it says so on stderr when it does not).
  if (!rest.empty()) {
    const CommandOutput acct = command_run(
        {"sacct", "-n", "-P", "-X", "-o", "JobID,State,ExitCode", "-j", fmt::format("{}", fmt::join(rest, ","))});
    if (acct.code == 0) {
      for (const std::string& line : split(acct.out, '\n')) {
        const std::vector<std::string> f = split(line, '|');
        if (f.size() < 3 || !wanted.count(f[0])) continue;
        const std::string state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 0" -> "CANCELLED"
        found[f[0]] = {state, exit_code_of(f[2]), ""};
      }
    }
  }
  // 3. scontrol, for jobs the controller still remembers (MinJobAge) without accounting.
  for (const std::string& id : rest) {
    if (found.count(id)) continue;
    const CommandOutput job = command_run({"scontrol", "show", "job", "-o", id});
    SlurmJobState state{"UNKNOWN", -1, "Slurm no longer knows this job"};
    if (job.code != 0 && job.err.find("Invalid job id") == std::string::npos) continue;  // not known now: ask later
    if (job.code == 0) {
      for (const std::string& field : split(trimmed(job.out), ' ')) {
        const std::size_t eq = field.find('=');
        if (eq == std::string::npos) continue;
        const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
        if (key == "JobState") state.state = value;
        if (key == "ExitCode") state.exit_code = exit_code_of(value);
        if (key == "Reason") state.reason = value == "None" ? "" : value;
      }
    }
    found[id] = state;
  }
  return found;
}

std::vector<ClusterJobRow> slurm_refresh(Store& store, const std::string& experiment) {
  ClusterJobs cluster_jobs(store);
  std::vector<ClusterJobRow> rows = cluster_jobs.list(experiment);
  std::vector<std::string> ids;
  for (const ClusterJobRow& row : rows) {
    if (row.scheduler == "slurm" && !slurm_state_final(row.state)) ids.push_back(row.job_id);
  }
  if (ids.empty()) return rows;
  const std::map<std::string, SlurmJobState> states = slurm_query(ids);
  for (ClusterJobRow& row : rows) {
    auto it = states.find(row.job_id);
    if (row.scheduler != "slurm" || slurm_state_final(row.state) || it == states.end()) continue;
    if (it->second.state != row.state || it->second.reason != row.reason || it->second.exit_code >= 0) {
      cluster_jobs.update(row.id, it->second.state, it->second.exit_code, it->second.reason);
      row.state = it->second.state;
      row.reason = it->second.reason;
      if (it->second.exit_code >= 0) row.exit_code = it->second.exit_code;
    }
  }
  return rows;
}

std::vector<ClusterJobRow> slurm_cancel(Store& store, const std::string& target) {
  std::vector<ClusterJobRow> cancelled;
  std::set<std::string> seen;
  const std::vector<ClusterJobRow> rows = slurm_refresh(store, "");
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (slurm_state_final(it->state) || (it->run != target && it->job_id != target)) continue;
    if (!seen.insert(it->experiment + "/" + it->run).second) continue;  // the newest submission of a run
    const CommandOutput out = command_run({"scancel", it->job_id});
    if (out.code != 0) {
      throw Error(fmt::format("scancel {} failed (exit {}): {}", it->job_id, out.code, trimmed(out.err + out.out)));
    }
    cancelled.push_back(*it);
  }
  if (cancelled.empty()) {
    throw UsageError(with_hint(fmt::format("no queued or running Slurm job of a run or with a job id '{}'", target),
                               "list them with `tfw jobs --slurm`"));
  }
  return cancelled;
}

SlurmExecutor::SlurmExecutor(SlurmOptions options) : options_(std::move(options)) {
  if (options_.program.empty()) options_.program = self_executable();
  options_.home = fs::absolute(options_.home).string();
  options_.work_dir = fs::absolute(options_.work_dir).string();
  if (options_.nproc < 1 || options_.nodes_per_run < 1) {
    throw UsageError(with_hint("--nproc and --nodes-per-run must be at least 1", "--nproc 2 --nodes-per-run 1"));
  }
  if (program_path("sbatch").empty()) {
    throw UsageError(with_hint("--executor slurm: sbatch is not on PATH",
                               "run it on a Slurm login node, or add Slurm's commands to PATH"));
  }
  store_ = Store::open(options_.home + "/runs.db");
}

std::string SlurmExecutor::describe() const {
  std::vector<std::string> parts;
  if (!options_.partition.empty()) parts.push_back("partition " + options_.partition);
  if (options_.cpus_per_task > 0)
    parts.push_back(fmt::format("{} CPU{} a task", options_.cpus_per_task, options_.cpus_per_task == 1 ? "" : "s"));
  if (options_.nproc > 1)
    parts.push_back(fmt::format("{} ranks a run on {} node(s)", options_.nproc, options_.nodes_per_run));
  return parts.empty() ? "Slurm" : fmt::format("Slurm ({})", fmt::join(parts, ", "));
}

std::size_t SlurmExecutor::active() const {
  std::size_t count = 0;
  for (const auto& [name, entry] : tasks_) count += !task_final(entry.status.state);
  return count;
}

void SlurmExecutor::submit(const Task& task) {
  if (tasks_.count(task.name) && !task_final(tasks_.at(task.name).status.state)) {
    throw Error(fmt::format("task {} is already submitted", task.name));
  }
  if (!task.after.empty() && !tasks_.count(task.after)) {
    throw Error(fmt::format("task {} waits for {}, which was never submitted", task.name, task.after));
  }
  Entry entry;
  entry.task = task;
  tasks_[task.name] = entry;
  queued_.push_back(task.name);
}

std::vector<std::string> SlurmExecutor::sbatch_options() const {
  std::vector<std::string> out;
  if (!options_.partition.empty()) out.push_back("--partition=" + options_.partition);
  if (!options_.account.empty()) out.push_back("--account=" + options_.account);
  if (!options_.time.empty()) out.push_back("--time=" + options_.time);
  if (!options_.gres.empty()) out.push_back("--gres=" + options_.gres);
  if (options_.cpus_per_task > 0) out.push_back(fmt::format("--cpus-per-task={}", options_.cpus_per_task));
  out.push_back(fmt::format("--nodes={}", options_.nodes_per_run));
  out.push_back(fmt::format("--ntasks={}", options_.nproc));
  out.push_back("--chdir=" + fs::current_path().string());
  return out;
}

std::string SlurmExecutor::run_script(const Entry& entry) const {
  const Task& task = entry.task;
  const std::string dir = run_dir_of(options_.home, options_.experiment, task.name);
  fs::create_directories(dir);
  const std::string path = dir + "/slurm-job.sh";
  std::ostringstream script;
  script << "#!/bin/bash\n"
         << "# Run '" << task.name << "' of experiment '" << options_.experiment
         << "', generated by `tfw run --executor slurm` (docs/cluster.md).\n"
         << "# Slurm runs it as an array task or as a job of its own; its output is appended to\n# " << task.log_path
         << "\n"
         << "set -uo pipefail\n"
         << "exec >> " << quoted(task.log_path) << " 2>&1\n"
         << "echo \"== Slurm job ${SLURM_JOB_ID}${SLURM_ARRAY_TASK_ID:+ (array task "
            "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID})} on $(hostname), $(date -u +%FT%TZ)\"\n"
         << "threads=${SLURM_CPUS_PER_TASK:-1}\n";
  for (const std::vector<std::string>& step : task.steps) {
    // Training over several ranks: srun starts one tfw per task of the allocation, and each
    // finds its rank in SLURM_PROCID (engine/dist/distributed.h).
    const bool ranks = options_.nproc > 1 && !step.empty() && step.front() == "train";
    script << (ranks ? "srun " : "") << quoted(options_.program) << " --threads \"$threads\"";
    for (const std::string& word : step) script << ' ' << quoted(word);
    script << " || exit $?\n";
  }
  std::ofstream(path) << script.str();
  fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  return path;
}

std::string SlurmExecutor::sbatch(std::vector<std::string> arguments, const std::string& what) {
  arguments.insert(arguments.begin(), {"sbatch", "--parsable"});
  const CommandOutput out = command_run(arguments);
  if (out.code == 127)
    throw UsageError(with_hint("sbatch not found", "--executor slurm needs Slurm's commands on PATH"));
  if (out.code != 0) {
    throw UsageError(with_hint(fmt::format("sbatch refused {}: {}", what, trimmed(out.err + out.out)),
                               "check --partition, --account, --time, --cpus-per-task, --gres and --nodes-per-run "
                               "against the cluster (sinfo shows its partitions and limits)"));
  }
  const std::string id = trimmed(split(trimmed(out.out), ';').empty() ? "" : split(trimmed(out.out), ';')[0]);
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    throw Error(fmt::format("sbatch said '{}' where it gives a job id", trimmed(out.out)));
  }
  return id;
}

void SlurmExecutor::flush() {
  std::vector<std::string> roots, children;
  for (const std::string& name : queued_) {
    if (tasks_.at(name).status.state == TaskState::cancelled) continue;
    (tasks_.at(name).task.after.empty() ? roots : children).push_back(name);
  }
  queued_.clear();
  auto record = [&](Entry& entry, const std::string& job_id, const std::string& script) {
    entry.job_id = job_id;
    entry.state = "PENDING";
    ClusterJobRow row;
    row.experiment = options_.experiment;
    row.run = entry.task.name;
    row.job_id = job_id;
    row.state = "PENDING";
    row.script = script;
    row.log = entry.task.log_path;
    entry.row = ClusterJobs(*store_).add(row);
  };
  if (!roots.empty()) {
    // One array: task i runs the i-th run's script.
    std::vector<std::string> scripts;
    for (const std::string& name : roots) scripts.push_back(run_script(tasks_.at(name)));
    std::string array_path;
    for (int i = 1;; ++i) {
      array_path = fmt::format("{}/slurm-array-{}.sh", options_.work_dir, i);
      if (!fs::exists(array_path)) break;
    }
    std::ostringstream array;
    array << "#!/bin/bash\n# A job array of experiment '" << options_.experiment
          << "', generated by `tfw run --executor slurm`: array task i runs the i-th run.\n"
          << "case \"$SLURM_ARRAY_TASK_ID\" in\n";
    for (std::size_t i = 0; i < roots.size(); ++i) {
      array << "  " << i << ") exec bash " << quoted(scripts[i]) << " ;;  # " << roots[i] << "\n";
    }
    array << "  *) echo \"no run for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\nesac\n";
    fs::create_directories(options_.work_dir);
    std::ofstream(array_path) << array.str();
    std::vector<std::string> arguments = sbatch_options();
    arguments.push_back(fmt::format("--array=0-{}{}", roots.size() - 1,
                                    options_.array_cap > 0 ? fmt::format("%{}", options_.array_cap) : ""));
    arguments.push_back("--job-name=tfw-" + options_.experiment);
    arguments.push_back("--output=" + options_.work_dir + "/slurm-%A_%a.out");
    arguments.push_back(array_path);
    const std::string job = sbatch(arguments, fmt::format("the job array of {} runs", roots.size()));
    std::ofstream(array_path, std::ios::app) << "# submitted as job array " << job << "\n";
    for (std::size_t i = 0; i < roots.size(); ++i) {
      record(tasks_.at(roots[i]), fmt::format("{}_{}", job, i), scripts[i]);
    }
  }
  for (const std::string& name : children) {
    Entry& entry = tasks_.at(name);
    const Entry& parent = tasks_.at(entry.task.after);
    const std::string script = run_script(entry);
    std::vector<std::string> arguments = sbatch_options();
    if (parent.state != "COMPLETED") {
      arguments.push_back("--dependency=afterok:" + parent.job_id);
      arguments.push_back("--kill-on-invalid-dep=yes");
    }
    arguments.push_back(fmt::format("--job-name=tfw-{}-{}", options_.experiment, name));
    arguments.push_back("--output=" + options_.work_dir + "/slurm-%j.out");
    arguments.push_back(script);
    const std::string job = sbatch(arguments, fmt::format("run {}", name));
    std::ofstream(script, std::ios::app) << "# submitted as job " << job
                                         << (parent.state != "COMPLETED" ? ", after job " + parent.job_id + " succeeds"
                                                                         : "")
                                         << "\n";
    record(entry, job, script);
  }
}

bool SlurmExecutor::adopt(const std::string& name) {
  std::optional<ClusterJobRow> newest;
  for (const ClusterJobRow& row : slurm_refresh(*store_, options_.experiment)) {
    if (row.run == name && row.scheduler == "slurm") newest = row;
  }
  if (!newest || slurm_state_final(newest->state)) return false;
  Entry entry;
  entry.task.name = name;
  entry.task.log_path = newest->log;
  entry.job_id = newest->job_id;
  entry.row = newest->id;
  entry.state = newest->state;
  entry.status.state = task_state_of(newest->state);
  tasks_[name] = entry;
  return true;
}

TaskStatus SlurmExecutor::status(const std::string& name) const {
  auto it = tasks_.find(name);
  if (it == tasks_.end()) throw UsageError(fmt::format("no Slurm task named '{}'", name));
  return it->second.status;
}

std::string SlurmExecutor::where(const std::string& name) const {
  auto it = tasks_.find(name);
  if (it == tasks_.end() || it->second.job_id.empty()) return "";
  return "Slurm job " + it->second.job_id;
}

void SlurmExecutor::cancel(const std::string& name) {
  auto it = tasks_.find(name);
  if (it == tasks_.end() || task_final(it->second.status.state)) return;
  if (it->second.job_id.empty()) {  // never sent
    it->second.status.state = TaskState::cancelled;
    return;
  }
  const CommandOutput out = command_run({"scancel", it->second.job_id});
  if (out.code != 0) {
    throw Error(
        fmt::format("scancel {} failed (exit {}): {}", it->second.job_id, out.code, trimmed(out.err + out.out)));
  }
}

std::vector<std::string> SlurmExecutor::poll(double seconds) {
  // squeue and friends ask the controller: at most every TFW_SLURM_POLL seconds (default 2).
  const char* every = std::getenv("TFW_SLURM_POLL");
  const double interval = every != nullptr && std::atof(every) > 0 ? std::atof(every) : 2.0;
  const double wait = std::min(seconds, last_query_ + interval - now_seconds());
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  std::vector<std::string> ids;
  for (const auto& [name, entry] : tasks_) {
    if (!entry.job_id.empty() && !task_final(entry.status.state)) ids.push_back(entry.job_id);
  }
  std::vector<std::string> finished;
  if (!ids.empty() && now_seconds() - last_query_ >= interval) {
    last_query_ = now_seconds();
    std::map<std::string, SlurmJobState> states;
    try {
      states = slurm_query(ids);
    } catch (const UsageError&) {
      throw;
    } catch (const Error&) {
      // The controller did not answer (restarting, overloaded): the jobs are as they were.
    }
    for (auto& [name, entry] : tasks_) {
      auto it = states.find(entry.job_id);
      if (it == states.end() || task_final(entry.status.state)) continue;
      const SlurmJobState& s = it->second;
      if (s.state != entry.state || slurm_state_final(s.state)) {
        ClusterJobs(*store_).update(entry.row, s.state, s.exit_code, s.reason);
      }
      entry.state = s.state;
      entry.status.state = task_state_of(s.state);
      entry.status.step = entry.task.steps.empty() ? 0 : entry.task.steps.size() - 1;
      if (s.exit_code >= 0) entry.status.exit_code = s.exit_code;
    }
  }
  for (auto& [name, entry] : tasks_) {
    if (task_final(entry.status.state) && !entry.reported) {
      entry.reported = true;
      finished.push_back(name);
    }
  }
  return finished;
}

}  // namespace tfw::runner
