// `tfw run EXPERIMENT.toml [--jobs N] [--only PATTERN] [--dry-run]`: plan an experiment file
// and execute it in dependency order. Each run is a child `tfw train` process (a grown stage
// is `tfw grow` from its parent's last checkpoint, then `tfw train --init-from`), so runs
// are isolated and --jobs shares the cores between them. Running the file again skips
// finished runs and resumes killed or crashed ones; SIGINT/SIGTERM stop the children, which
// checkpoint, and the batch exits 130.
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint_meta.h"
#include "engine/error.h"
#include "engine/experiment.h"
#include "engine/home.h"
#include "engine/peak.h"
#include "engine/registry.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

std::atomic<int> stop_signal{0};
extern "C" void on_batch_signal(int signal_number) { stop_signal.store(signal_number); }

struct RunArgs {
  std::string file, only, home;
  int jobs = 1;
  bool dry_run = false, json = false;
};

// Runs matching --only, plus their ancestors (a stage needs its parent).
std::vector<const ExperimentRun*> selected(const Experiment& experiment, const std::string& pattern) {
  std::map<std::string, const ExperimentRun*> by_name;
  for (const ExperimentRun& run : experiment.runs) by_name[run.name] = &run;
  std::set<std::string> keep;
  for (const ExperimentRun& run : experiment.runs) {
    if (!pattern.empty() && fnmatch(pattern.c_str(), run.name.c_str(), 0) != 0) continue;
    for (const ExperimentRun* r = &run; r != nullptr; r = r->parent.empty() ? nullptr : by_name[r->parent]) {
      keep.insert(r->name);
    }
  }
  std::vector<const ExperimentRun*> out;
  for (const ExperimentRun& run : experiment.runs) {
    if (keep.count(run.name)) out.push_back(&run);
  }
  if (out.empty()) throw UsageError(fmt::format("--only '{}' matches no run of {}", pattern, experiment.path));
  return out;
}

void print_plan(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs, const std::string& home,
                bool json) {
  // Time estimate: the machine's measured matmul peak at an efficiency typical of these small
  // models on CPU (the MFU tfw train reports: 25-60% here); 35% is assumed.
  const double efficiency = 0.35;
  const double peak = peak_flops_resolve(home, 0);
  double total_seconds = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const ExperimentRun* run : runs) {
    const double seconds = run->flops / (peak * efficiency);
    total_seconds += seconds;
    list.push_back({{"name", run->name}, {"parent", run->parent.empty() ? nlohmann::json(nullptr) : nlohmann::json(run->parent)},
                    {"growth_method", run->growth_method}, {"family", run->config.model.family},
                    {"parameters", run->config.model.spec->parameter_count()},
                    {"steps", run->plan.total_steps},
                    {"tokens", run->plan.total_steps * run->plan.tokens_per_step},
                    {"training_flops", run->flops}, {"cumulative_flops", run->cumulative_flops},
                    {"corpus", run->config.data.corpus}, {"estimated_seconds", seconds}});
  }
  if (json) {
    print_json({{"experiment", experiment.name}, {"file", experiment.path}, {"runs", list},
                {"peak_flops", peak}, {"assumed_mfu", efficiency}, {"estimated_seconds", total_seconds}});
    return;
  }
  std::cout << fmt::format("experiment {} ({}): {} runs\n", experiment.name, experiment.path, runs.size());
  std::cout << fmt::format("{:<34} {:<26} {:<12} {:>12} {:>12} {:>11} {:>11} {:>8}\n", "run", "parent (method)", "family",
                           "parameters", "tokens", "FLOPs", "cum. FLOPs", "est.");
  for (const auto& row : list) {
    std::string parent = row["parent"].is_null() ? "-"
                                                 : fmt::format("{} ({})", row["parent"].get<std::string>(),
                                                               row["growth_method"].get<std::string>());
    std::cout << fmt::format("{:<34} {:<26} {:<12} {:>12} {:>12} {:>11.3e} {:>11.3e} {:>8}\n",
                             row["name"].get<std::string>(), parent, row["family"].get<std::string>(),
                             grouped(row["parameters"].get<std::int64_t>()), grouped(row["tokens"].get<std::int64_t>()),
                             row["training_flops"].get<double>(), row["cumulative_flops"].get<double>(),
                             duration_text(row["estimated_seconds"].get<double>()));
  }
  std::cout << fmt::format("estimated {} at {:.0f}% of the measured peak {:.3e} FLOP/s\n", duration_text(total_seconds),
                           100 * efficiency, peak);
}

// Starts `tfw ARGS...` as a child process; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& log_path) {
  // This executable; if it was rebuilt while the batch runs, the link reads "... (deleted)":
  // the path then names the new build, which is the one to run.
  std::string exe = fs::read_symlink("/proc/self/exe").string();
  const std::string deleted = " (deleted)";
  if (exe.size() > deleted.size() && exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0) {
    exe.erase(exe.size() - deleted.size());
  }
  pid_t pid = fork();
  if (pid == 0) {
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  if (pid < 0) throw Error("tfw run: fork failed");
  return pid;
}

std::string option_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](auto&& value) { out << value; });
  return out.str();
}

// The shell of one run: grow from the parent if it is a stage, then train or resume.
struct Job {
  const ExperimentRun* run = nullptr;
  pid_t pid = 0;
  std::string phase;  // "grow" or "train"
};

void run_experiment(const RunArgs& args) {
  const std::string home = home_resolve(args.home);
  Experiment experiment = experiment_load(registry(), args.file);
  std::vector<const ExperimentRun*> runs = selected(experiment, args.only);
  if (args.dry_run) {
    print_plan(experiment, runs, home, args.json);
    return;
  }
  const int jobs = std::max(1, args.jobs);
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / jobs);
  const std::string work = home + "/experiments/" + experiment.name;
  fs::create_directories(work);
  std::unique_ptr<Store> store = Store::open(home + "/runs.db");
  store->experiment_ensure(experiment.name, fs::absolute(args.file).string());

  std::map<std::string, std::string> state;  // run -> pending, running, finished, failed, blocked
  // A finished run whose config the file has since changed would be skipped silently, and
  // its old numbers read as the new config's: refuse before anything runs.
  std::vector<std::string> changed;
  for (const ExperimentRun* run : runs) {
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, run->name);
    if (!record || record->status != "finished") continue;
    try {
      if (toml::parse(record->config) != run->config.resolved) changed.push_back(run->name);
    } catch (const std::exception&) {
      changed.push_back(run->name);
    }
  }
  if (!changed.empty()) {
    throw UsageError(with_hint(
        fmt::format("{} finished run{} of experiment {} ha{} a different config in the store than in {} now: {}",
                    changed.size(), changed.size() == 1 ? "" : "s", experiment.name, changed.size() == 1 ? "s" : "ve",
                    args.file, fmt::join(changed, ", ")),
        "to re-run them with the file's config, delete the old ones first (tfw runs delete NAME... --files); to keep "
        "both, give the changed entries new names"));
  }
  for (const ExperimentRun* run : runs) {
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, run->name);
    state[run->name] = record && record->status == "finished" ? "finished" : "pending";
    if (state[run->name] == "finished") std::cerr << fmt::format("{}: finished before, skipped\n", run->name);
  }
  // Without SA_RESTART, so that the signal interrupts waitpid() and is forwarded at once.
  struct sigaction action {};
  action.sa_handler = on_batch_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::vector<Job> active;
  // A live line per running run (step, loss, tokens/s, ETA), read from the store: on a
  // terminal one line rewritten in place, otherwise a line every 30 s.
  const bool tty = isatty(STDERR_FILENO);
  struct Seen {
    RunCursor cursor;
    std::int64_t step = -1, first_step = -1;
    double loss = std::nan(""), first_wall = 0, wall = 0;
  };
  std::map<std::string, Seen> seen;
  auto last_print = std::chrono::steady_clock::now();
  bool line_open = false;
  auto clear_progress = [&] {
    if (tty && line_open) std::cerr << "\r\033[K" << std::flush;
    line_open = false;
  };
  auto show_progress = [&] {
    const auto now = std::chrono::steady_clock::now();
    if (!tty && now - last_print < std::chrono::seconds(30)) return;
    std::vector<std::string> parts;
    for (const Job& job : active) {
      if (job.phase != "train") {
        parts.push_back(fmt::format("{}: growing", job.run->name));
        continue;
      }
      std::optional<RunRecord> record = store->run_in_experiment(experiment.name, job.run->name);
      if (!record) {
        parts.push_back(fmt::format("{}: starting", job.run->name));
        continue;
      }
      Seen& s = seen[job.run->name];
      for (const MetricPoint& p : store->news(record->id, s.cursor).points) {
        if (p.key != "train/loss" || p.step < s.step) continue;
        if (s.first_step < 0) {
          s.first_step = p.step;
          s.first_wall = p.wall;
        }
        s.step = p.step;
        s.loss = p.value;
        s.wall = p.wall;
      }
      if (s.step < 0) {
        parts.push_back(fmt::format("{}: preparing", job.run->name));
        continue;
      }
      const double rate = s.wall > s.first_wall ? static_cast<double>(s.step - s.first_step) / (s.wall - s.first_wall) : 0;
      const std::int64_t total = job.run->plan.total_steps;
      parts.push_back(fmt::format("{}: step {}/{} | loss {:.4f} | {:.0f} tok/s | ETA {}", job.run->name, s.step + 1,
                                  total, s.loss, rate * static_cast<double>(job.run->plan.tokens_per_step),
                                  rate > 0 ? duration_text(static_cast<double>(total - s.step - 1) / rate) : "?"));
    }
    if (parts.empty()) return;
    const std::string line = fmt::format("{}", fmt::join(parts, "  ·  "));
    if (tty) {
      std::cerr << "\r\033[K" << line.substr(0, 200) << std::flush;
      line_open = true;
    } else {
      std::cerr << line << "\n";
    }
    last_print = now;
  };

  auto last_checkpoint = [&](const std::string& name) -> std::string {
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, name);
    if (!record) return "";
    std::vector<CheckpointRow> rows = store->checkpoints(record->id);
    return rows.empty() ? "" : rows.back().path;
  };
  auto start = [&](const ExperimentRun* run) {
    clear_progress();
    const std::string config_path = work + "/" + run->name + ".toml";
    std::ofstream(config_path) << "# generated by tfw run from " << experiment.path << "\n" << run->config_toml << "\n";
    const std::string log = work + "/" + run->name + ".log";
    const std::vector<std::string> common = {"--threads", std::to_string(threads)};
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, run->name);
    std::vector<std::string> argv = common;
    Job job{run, 0, "train"};
    if (record && !checkpoint_list(record->run_dir + "/checkpoints").empty()) {
      // killed, crashed or failed before: continue it as the same run (one that never
      // checkpointed starts again below, and tfw train replaces its record)
      std::cerr << fmt::format("{}: {} before, resuming\n", run->name, record->status);
      argv.insert(argv.end(), {"train", "--resume", std::to_string(record->id), "--home", home});
    } else if (!run->parent.empty() && !fs::exists(work + "/grown-" + run->name + "/step-00000000.toml")) {
      job.phase = "grow";
      argv.insert(argv.end(), {"grow", "--method", run->growth_method, "--from", last_checkpoint(run->parent), "--to",
                               config_path, "--out", work + "/grown-" + run->name, "--home", home});
      for (const auto& [key, value] : run->growth_options) {
        argv.insert(argv.end(), {"--option", fmt::format("{}={}", key.str(), option_text(value))});
      }
    } else {
      argv.insert(argv.end(), {"train", config_path, "--name", run->name, "--experiment", experiment.name, "--home", home});
      if (!run->parent.empty()) argv.insert(argv.end(), {"--init-from", work + "/grown-" + run->name + "/step-00000000.pt"});
    }
    std::cerr << fmt::format("{}: {} (log {})\n", run->name, job.phase == "grow" ? "growing from " + run->parent : "training", log);
    job.pid = spawn(argv, log);
    active.push_back(job);
    state[run->name] = "running";
  };

  bool stopping = false;
  while (true) {
    if (stop_signal.load() != 0 && !stopping) {
      stopping = true;
      std::cerr << "tfw run: stopping; the runs checkpoint and can be resumed by running the file again\n";
      for (const Job& job : active) kill(job.pid, SIGTERM);
    }
    if (!stopping) {
      for (const ExperimentRun* run : runs) {
        if (static_cast<int>(active.size()) >= jobs) break;
        if (state[run->name] != "pending") continue;
        if (!run->parent.empty()) {
          const std::string& parent = state[run->parent];
          if (parent == "failed" || parent == "blocked") {
            state[run->name] = "blocked";
            continue;
          }
          if (parent != "finished") continue;
        }
        start(run);
      }
    }
    if (active.empty()) break;
    int status = 0;
    pid_t done = waitpid(-1, &status, WNOHANG);
    if (done == 0) {  // all still running: show where they are, then wait a little
      show_progress();
      usleep(500 * 1000);  // a signal cuts it short
      continue;
    }
    if (done < 0) continue;  // EINTR from our signal: loop to forward it
    clear_progress();
    auto it = std::find_if(active.begin(), active.end(), [&](const Job& j) { return j.pid == done; });
    if (it == active.end()) continue;
    Job job = *it;
    active.erase(it);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 0 && job.phase == "grow") {
      state[job.run->name] = "pending";  // grown: train it next
    } else if (code == 0) {
      state[job.run->name] = "finished";
      std::cerr << fmt::format("{}: finished\n", job.run->name);
    } else if (code == 130 || stopping) {
      state[job.run->name] = "stopped";
      std::cerr << fmt::format("{}: stopped (exit {})\n", job.run->name, code);
    } else {
      state[job.run->name] = "failed";
      std::cerr << fmt::format("{}: failed (exit {}); see {}/{}.log\n", job.run->name, code, work, job.run->name);
    }
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  int finished = 0, failed = 0, blocked = 0;
  for (const ExperimentRun* run : runs) {
    finished += state[run->name] == "finished";
    failed += state[run->name] == "failed";
    blocked += state[run->name] == "blocked";
  }
  clear_progress();
  std::cerr << fmt::format("experiment {}: {} of {} runs finished, {} failed, {} blocked by a failed parent\n",
                           experiment.name, finished, runs.size(), failed, blocked);
  for (const ExperimentRun* run : runs) {
    std::optional<RunRecord> record = store->run_in_experiment(experiment.name, run->name);
    if (!record) continue;
    const nlohmann::json metrics = nlohmann::json::parse(record->final_metrics, nullptr, false);
    if (metrics.is_object() && metrics.value("contended", false)) {
      std::cerr << fmt::format("contention: other processes used {:.0f}% of the CPUs while {} trained; its times are "
                               "not comparable with a run on an idle machine\n",
                               100 * metrics.value("other_cpu_share", 0.0), run->name);
    }
  }
  if (stopping) throw Interrupted();
  if (failed + blocked > 0) throw Error(fmt::format("{} runs did not finish (see the logs in {})", failed + blocked, work));
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* command = app.add_subcommand("run", "Plan and run an experiment file (docs/experiments.md)");
  command->add_option("experiment", args->file, "experiment TOML")->required();
  command->add_option("--jobs", args->jobs, "runs in parallel (the cores are shared between them)")
      ->check(CLI::PositiveNumber);
  command->add_option("--only", args->only, "only runs matching this glob (and their ancestors)");
  command->add_flag("--dry-run", args->dry_run, "print the plan (runs, parents, parameters, tokens, FLOPs, time)");
  command->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
  command->add_flag("--json", args->json, "with --dry-run: the plan as JSON (keys in docs/cli.md)");
  command->callback([args] { run_experiment(*args); });
}

}  // namespace tfw::cli
