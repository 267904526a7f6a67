// `tfw jobs --slurm` and `tfw cancel --slurm`: the runs `tfw run --executor slurm` submitted,
// read from the store's cluster_jobs with their states refreshed from Slurm
// (runner/executor_slurm.h), and scancel. Registered by cmd_remote.cpp beside the service's
// `tfw jobs` and `tfw cancel`.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/home.h"
#include "runner/cluster_jobs.h"
#include "runner/executor_slurm.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

nlohmann::json row_json(const runner::ClusterJobRow& row) {
  return {{"id", row.id},
          {"experiment", row.experiment},
          {"run", row.run},
          {"scheduler", row.scheduler},
          {"job_id", row.job_id},
          {"state", row.state},
          {"exit_code", row.exit_code < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.exit_code)},
          {"reason", row.reason},
          {"submitted", row.submitted},
          {"updated", row.updated},
          {"script", row.script},
          {"log", row.log}};
}

void rows_json_print(const char* key, const std::vector<runner::ClusterJobRow>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const runner::ClusterJobRow& row : rows) list.push_back(row_json(row));
  print_json({{key, list}});
}

}  // namespace

void cluster_jobs_print(const std::string& home, const std::string& experiment, bool json) {
  std::unique_ptr<Store> store = Store::open(home_resolve(home) + "/runs.db");
  const std::vector<runner::ClusterJobRow> rows = runner::slurm_refresh(*store, experiment);
  if (json) return rows_json_print("jobs", rows);
  if (rows.empty()) {
    std::cout << "(no Slurm jobs" << (experiment.empty() ? "" : " of experiment " + experiment) << ")\n";
    return;
  }
  std::cout << fmt::format("{:>4}  {:<22} {:<28} {:<10} {:<11} {:>4}  {:<9} {}\n", "id", "experiment", "run", "job",
                           "state", "exit", "submitted", "reason");
  for (const runner::ClusterJobRow& row : rows) {
    std::cout << fmt::format("{:>4}  {:<22} {:<28} {:<10} {:<11} {:>4}  {:<9} {}\n", row.id, row.experiment, row.run,
                             row.job_id, row.state, row.exit_code < 0 ? "-" : std::to_string(row.exit_code),
                             local_time(row.submitted, "%H:%M:%S"), row.reason);
  }
}

void cluster_cancel(const std::string& home, const std::string& target, bool json) {
  std::unique_ptr<Store> store = Store::open(home_resolve(home) + "/runs.db");
  const std::vector<runner::ClusterJobRow> cancelled = runner::slurm_cancel(*store, target);
  if (json) return rows_json_print("cancelled", cancelled);
  for (const runner::ClusterJobRow& row : cancelled) {
    std::cout << fmt::format("scancel {}: run {} of experiment {} (it was {}); a running training checkpoints first\n",
                             row.job_id, row.run, row.experiment, row.state);
  }
}

}  // namespace tfw::cli
