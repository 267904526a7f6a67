// The engine service's clients: `tfw submit FILE`, `tfw jobs`, `tfw cancel JOB`,
// `tfw watch RUN`, each with --connect HOST:PORT (default: $TFW_SERVICE, else the local
// service on 127.0.0.1:7433), --token-file FILE and --json. One file: they share the
// connection options and differ by a few lines each.
#include <fnmatch.h>

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/config/experiment.h"
#include "storage/status.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/service/client.h"
#include "workbench/service/job_capabilities.h"
#include "workbench/service/server.h"
#include "workbench/service/protocol.h"

namespace fs = std::filesystem;

namespace tfw::cli {

namespace {

struct Connect {
  std::string address, token_file, home;
  bool json = false;
  // --connect, else $TFW_SERVICE, else the service that serves TFW_HOME now (its
  // service.lock names its address), else the default address.
  service::Client open() const { return service::Client(resolved(), token_file); }
  // The service's address, as the capabilities of its jobs are kept under (job_capabilities.h).
  std::string resolved() const {
    std::string where = address;
    const char* env = std::getenv("TFW_SERVICE");
    if (where.empty() && (env == nullptr || *env == '\0')) where = service::service_address_of(home_resolve(home));
    return service::address_resolve(where);
  }
};

void connection_options(CLI::App* command, Connect& connect) {
  command->add_option("--connect", connect.address,
                      "HOST:PORT of the service (default: $TFW_SERVICE, else the service serving TFW_HOME, else "
                      "127.0.0.1:7433)");
  command->add_option("--home", connect.home, "TFW_HOME whose service to find (default: $TFW_HOME or ./tfw-home)");
  command->add_option("--token-file", connect.token_file, "the service's token file");
  command->add_flag("--json", connect.json, "machine-readable output");
}

bool final_status(const std::string& status) {
  const std::optional<RunStatus> parsed = run_status_parse(status);
  return parsed && status_final(*parsed);
}

void submit(const Connect& connect, const std::string& file, const std::string& name) {
  toml::table table;
  try {
    table = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    throw UsageError(
        fmt::format("{}:{}:{}: {}", file, e.source().begin.line, e.source().begin.column, e.description()));
  }
  nlohmann::json message = {{"type", "submit"}};
  if (table.contains("experiment") || table.contains("runs")) {
    message["experiment"] = experiment_self_contained(file);  // config files inlined: nothing to fetch
  } else {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    message["run"] = text.str();
    message["name"] = fs::path(file).stem().string();
  }
  if (!name.empty()) message["name"] = name;
  // The job's capability is kept, and a name submitted before sends its own.
  std::string job_name = message.value("name", table["experiment"]["name"].value_or(std::string()));
  const std::string address = connect.resolved();
  service::Client client(address, connect.token_file);
  const nlohmann::json reply =
      service::job_submit(address, job_name, message, [&](const nlohmann::json& m) { return client.request(m); });
  if (connect.json) return print_json(reply);
  std::vector<std::string> runs = reply["runs"].get<std::vector<std::string>>();
  fmt::print("job {} queued: {} ({} run{}: {})\n", reply["job"].get<std::int64_t>(), reply["name"].get<std::string>(),
             runs.size(), runs.size() == 1 ? "" : "s", fmt::join(runs, ", "));
}

void jobs(const Connect& connect) {
  service::Client client = connect.open();
  const nlohmann::json reply = {{"type", "jobs"}, {"jobs", service::jobs_all(client)}};
  if (connect.json) return print_json(reply);
  fmt::print("{:>4}  {:<24} {:<10} {:<10} {:>9} {:>9} {:>9}  {}\n", "job", "name", "kind", "status", "submitted",
             "started", "ended", "error");
  const nlohmann::json list = reply["jobs"];
  for (const auto& job : list) {
    std::string error = job["error"].get<std::string>();
    if (auto newline = error.find('\n'); newline != std::string::npos) error = error.substr(0, newline) + " ...";
    fmt::print("{:>4}  {:<24} {:<10} {:<10} {:>9} {:>9} {:>9}  {}\n", job["id"].get<std::int64_t>(),
               job["name"].get<std::string>(), job["kind"].get<std::string>(), job["status"].get<std::string>(),
               local_time(job["submitted"].get<double>(), "%H:%M:%S"),
               local_time(job["started"].get<double>(), "%H:%M:%S"), local_time(job["ended"].get<double>(), "%H:%M:%S"),
               error);
  }
}

void cancel(const Connect& connect, std::int64_t job) {
  const std::string address = connect.resolved();
  service::Client client(address, connect.token_file);
  const nlohmann::json reply =
      service::job_cancel(address, job, [&](const nlohmann::json& m) { return client.request(m); });
  if (connect.json) return print_json(reply);
  fmt::print("job {} cancelled (it was {})\n", job, reply["was"].get<std::string>());
}

struct WatchView {
  std::vector<std::string> keys;  // globs over metric keys; empty: every key
  bool compact = false;           // one line per step
};

bool key_wanted(const WatchView& view, const std::string& key) {
  if (view.keys.empty()) return true;
  for (const std::string& glob : view.keys) {
    if (fnmatch(glob.c_str(), key.c_str(), 0) == 0) return true;
  }
  return false;
}

// Streams a run's metrics and events; ends when the run has ended.
void watch(const Connect& connect, const std::string& run, double wait, WatchView view) {
  if (view.compact && view.keys.empty()) view.keys = {"train/loss", "train/lr", "val/loss"};
  service::Client client = connect.open();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
  nlohmann::json reply;
  while (true) {
    client.send({{"type", "watch"}, {"run", run}});
    reply = client.receive(60);
    if (reply.value("type", "") != "error") break;
    if (std::chrono::steady_clock::now() >= deadline) throw UsageError(reply.value("error", "watch failed"));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // the run is not in the store yet
  }
  if (connect.json)
    std::cout << reply.dump() << "\n" << std::flush;
  else
    fmt::print("watching run {} ({}, {})\n", reply["run"]["id"].get<std::int64_t>(),
               reply["run"]["name"].get<std::string>(), reply["run"]["status"].get<std::string>());
  bool caught_up = false;
  std::string status = reply["run"]["status"];
  // Compact: the wanted keys of one step on one line, printed when the step changes.
  std::int64_t line_step = -1;
  std::vector<std::pair<std::string, std::string>> line;
  auto flush_line = [&] {
    if (line.empty()) return;
    std::string text = fmt::format("step {:>7}", line_step);
    for (const auto& [key, value] : line) text += fmt::format("  {} {}", key, value);
    fmt::print("{}\n", text);
    line.clear();
  };
  while (true) {
    nlohmann::json message = client.receive();
    const std::string type = message.value("type", "");
    if (type == "metric" && !key_wanted(view, message.value("key", ""))) continue;
    if (connect.json) std::cout << message.dump() << "\n" << std::flush;
    if (type != "metric" && view.compact) flush_line();
    if (type == "metric" && !connect.json) {
      const nlohmann::json& value = message["value"];
      const std::string text = value.is_null() ? std::string("nan") : fmt::format("{:.6g}", value.get<double>());
      const std::int64_t step = message["step"].get<std::int64_t>();
      if (view.compact) {
        if (step != line_step) flush_line();
        line_step = step;
        line.emplace_back(message["key"].get<std::string>(), text);
      } else {
        fmt::print("step {:>7}  {:<20} {}\n", step, message["key"].get<std::string>(), text);
      }
    } else if (type == "event" && !connect.json) {
      fmt::print("step {:>7}  event {} {}\n", message["step"].get<std::int64_t>(), message["kind"].get<std::string>(),
                 message["payload"].dump());
    } else if (type == "status") {
      status = message["status"];
      if (!connect.json) fmt::print("status: {}\n", status);
    } else if (type == "caught_up") {
      caught_up = true;
      status = message["status"];
    } else if (type == "error") {
      throw Error(message.value("error", "the service closed the stream"));
    }
    std::cout << std::flush;
    if (caught_up && final_status(status)) {
      flush_line();
      return;
    }
  }
}

}  // namespace

void add_remote_commands(CLI::App& app) {
  {
    auto connect = std::make_shared<Connect>();
    auto file = std::make_shared<std::string>();
    auto name = std::make_shared<std::string>();
    CLI::App* command = app.add_subcommand("submit", "Queue an experiment file or a run config on the engine service");
    command->add_option("file", *file, "an experiment file (its config files are inlined) or a run config")
        ->required()
        ->check(CLI::ExistingFile);
    command->add_option("--name", *name, "the job's name (default: experiment.name, or the run config's file stem)");
    connection_options(command, *connect);
    command->callback([connect, file, name] { submit(*connect, *file, *name); });
  }
  {
    auto connect = std::make_shared<Connect>();
    auto slurm = std::make_shared<bool>(false);
    auto experiment = std::make_shared<std::string>();
    CLI::App* command =
        app.add_subcommand("jobs", "The engine service's jobs, or with --slurm the runs submitted to Slurm");
    connection_options(command, *connect);
    command->add_flag("--slurm", *slurm,
                      "the runs `tfw run --executor slurm` submitted (from the store of --home), states from Slurm");
    command->add_option("--experiment", *experiment, "with --slurm: only this experiment's runs");
    command->callback([connect, slurm, experiment] {
      if (*slurm) return cluster_jobs_print(connect->home, *experiment, connect->json);
      if (!experiment->empty()) throw UsageError("--experiment goes with --slurm");
      jobs(*connect);
    });
  }
  {
    auto connect = std::make_shared<Connect>();
    auto job = std::make_shared<std::string>();
    auto slurm = std::make_shared<bool>(false);
    CLI::App* command =
        app.add_subcommand("cancel", "Cancel a job: a running one checkpoints and its runs end as killed");
    command->add_option("job", *job, "the job id (`tfw jobs`); with --slurm a run name or a Slurm job id")->required();
    command->add_flag("--slurm", *slurm, "scancel a run submitted with `tfw run --executor slurm`");
    connection_options(command, *connect);
    command->callback([connect, job, slurm] {
      if (*slurm) return cluster_cancel(connect->home, *job, connect->json);
      char* end = nullptr;
      const long long id = std::strtoll(job->c_str(), &end, 10);
      if (job->empty() || *end != '\0' || id <= 0) {
        throw UsageError(with_hint(fmt::format("tfw cancel {}: expected a job id of the service", *job),
                                   "`tfw jobs` lists them; a Slurm run is cancelled with --slurm"));
      }
      cancel(*connect, id);
    });
  }
  {
    auto connect = std::make_shared<Connect>();
    auto run = std::make_shared<std::string>();
    auto wait = std::make_shared<double>(0);
    auto view = std::make_shared<WatchView>();
    CLI::App* command = app.add_subcommand("watch", "Stream a run's metrics and events live, until it ends");
    command->add_option("run", *run, "a run id or name")->required();
    command->add_option("--wait", *wait, "seconds to wait for a run that is not in the store yet (queued)");
    command->add_option("--keys", view->keys, "only these metric keys (globs, comma-separated: 'train/loss,val/*')")
        ->delimiter(',');
    command->add_flag("--compact", view->compact, "one line per step (default keys: train/loss, train/lr, val/loss)");
    connection_options(command, *connect);
    command->callback([connect, run, wait, view] { watch(*connect, *run, *wait, *view); });
  }
}

}  // namespace tfw::cli
