// The dry run's plan. A CPU run's time is estimated from this machine's measured matmul peak at
// an assumed efficiency; a GPU run's from the tokens/s that finished runs of the same model
// measured on a GPU, read from the store (a GPU experiment planned on a CPU machine, its
// earlier units imported as bundles): a time no run has measured is not guessed.
#include "workbench/cli/run_plan.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/config/run_config.h"
#include "engine/machine/peak.h"
#include "storage/store.h"
#include "workbench/cli/output.h"
#include "workbench/results/pace.h"

namespace tfw::cli {

namespace {

// CPU runs: the MFU tfw train reports for these small models here is 25-60%; 35% is assumed.
constexpr double kCpuEfficiency = 0.35;

// This experiment's finished runs, and the GPU paces of every finished run in the home.
struct Paces {
  std::set<std::string> finished;
  results::GpuPaces gpu;
};

Paces paces_read(const Experiment& experiment, const std::string& home) {
  Paces paces;
  if (!std::filesystem::exists(home + "/runs.db")) return paces;
  RunFilter filter;
  filter.status = RunStatus::finished;
  for (const RunRecord& r : Store::open_readonly(home + "/runs.db")->runs(filter)) {
    if (r.experiment == experiment.name) paces.finished.insert(r.name);
    paces.gpu.add(r);
  }
  return paces;
}

struct Estimate {
  double seconds = std::nan("");
  std::string from;  // "done", "peak", "measured" (tokens/s of N runs), or "" (none)
  std::size_t measured_runs = 0;
};

Estimate estimate(const ExperimentRun& run, const Paces& paces, double peak) {
  if (paces.finished.count(run.name)) return {0, "done", 0};
  if (!run.config.train.device.is_cuda()) {
    return peak > 0 ? Estimate{run.flops / (peak * kCpuEfficiency), "peak", 0} : Estimate{};
  }
  Estimate e;
  e.seconds = paces.gpu.seconds(run_config_to_toml(run.config),
                                static_cast<double>(run.plan.total_steps * run.plan.tokens_per_step), &e.measured_runs);
  if (std::isfinite(e.seconds)) e.from = "measured";
  return e;
}

nlohmann::json seconds_json(double seconds) {
  return std::isfinite(seconds) ? nlohmann::json(seconds) : nlohmann::json(nullptr);
}

std::string seconds_cell(const Estimate& e) {
  if (e.from == "done") return "done";
  return std::isfinite(e.seconds) ? duration_text(e.seconds) : "-";
}

// The closing lines: what the estimates rest on, for the CPU runs and for the GPU runs.
void print_estimate_notes(const std::vector<const ExperimentRun*>& runs, const std::vector<Estimate>& estimates,
                          double peak, const std::string& home) {
  double cpu_seconds = 0, gpu_seconds = 0;
  std::size_t cpu_left = 0, gpu_left = 0, gpu_unmeasured = 0, finished = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Estimate& e = estimates[i];
    if (e.from == "done") {
      ++finished;
    } else if (runs[i]->config.train.device.is_cuda()) {
      ++gpu_left;
      if (std::isfinite(e.seconds))
        gpu_seconds += e.seconds;
      else
        ++gpu_unmeasured;
    } else {
      ++cpu_left;
      cpu_seconds += e.seconds;
    }
  }
  if (cpu_left > 0 && peak > 0) {
    std::cout << fmt::format(
        "estimated {} for the {} runs left ({} finished) at an assumed {:.0f}% of this machine's "
        "matmul peak, {:.3e} FLOP/s, probed idle and cached in {}/machine.toml; the CPU's own "
        "pace and other work on it move this by a factor of 2 either way\n",
        duration_text(cpu_seconds), cpu_left, finished, 100 * kCpuEfficiency, peak, home);
  } else if (cpu_left > 0) {
    std::cout << fmt::format(
        "no time estimate for the {} runs left ({} finished): other processes used the CPUs "
        "while the matmul peak was probed, and no idle probe is cached in {}/machine.toml yet\n",
        cpu_left, finished, home);
  }
  if (gpu_left == 0) return;
  if (gpu_unmeasured == gpu_left) {
    std::cout << fmt::format(
        "no time estimate for the {} GPU runs left ({} finished): no finished run in {} has measured "
        "the tokens/s of their models on a GPU yet (run one unit, or import its bundle, first)\n",
        gpu_left, finished, home);
  } else {
    std::cout << fmt::format(
        "estimated {} of GPU time for {} of the {} GPU runs left ({} finished), from the tokens/s that finished "
        "runs of the same model, batch and precision measured on a GPU (their median); {} with no such "
        "run yet have no estimate\n",
        duration_text(gpu_seconds), gpu_left - gpu_unmeasured, gpu_left, finished, gpu_unmeasured);
  }
}

}  // namespace

void print_plan(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs, const std::string& home,
                bool json, const std::vector<std::string>& problems) {
  // A peak probed beside busy processes is not used (engine/machine/peak.h).
  const double peak = peak_flops_resolve(home, 0);
  const Paces paces = paces_read(experiment, home);
  std::map<std::string, Estimate> by_name;
  std::vector<Estimate> estimates;
  double total_seconds = 0;
  nlohmann::json list = nlohmann::json::array();
  for (const ExperimentRun* run : runs) {
    const Estimate e = estimate(*run, paces, peak);
    estimates.push_back(e);
    by_name[run->name] = e;
    total_seconds += e.seconds;
    list.push_back({{"name", run->name},
                    {"parent", run->parent.empty() ? nlohmann::json(nullptr) : nlohmann::json(run->parent)},
                    {"growth_method", run->growth_method},
                    {"family", run->config.model.family},
                    {"device", run->config.train.device.text()},
                    {"parameters", run->config.model.spec->parameter_count()},
                    {"steps", run->plan.total_steps},
                    {"tokens", run->plan.total_steps * run->plan.tokens_per_step},
                    {"training_flops", run->flops},
                    {"cumulative_flops", run->cumulative_flops},
                    {"corpus", run->config.data.corpus},
                    {"finished", e.from == "done"},
                    {"estimated_seconds", seconds_json(e.seconds)},
                    {"estimate_from", e.from.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.from)},
                    {"measured_runs", e.measured_runs}});
  }
  // The units the selected runs fall in, with their state and time.
  nlohmann::json units = nlohmann::json::array();
  for (const ExperimentUnit& unit : experiment.units) {
    std::size_t finished = 0, selected = 0;
    double seconds = 0;
    for (const std::string& name : unit.runs) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) continue;
      ++selected;
      finished += it->second.from == "done";
      seconds += it->second.seconds;
    }
    if (selected == 0) continue;
    units.push_back({{"name", unit.name},
                     {"pattern", unit.pattern},
                     {"seed", unit.seed},
                     {"runs", unit.runs},
                     {"finished_runs", finished},
                     {"finished", finished == unit.runs.size()},
                     {"estimated_seconds", seconds_json(seconds)}});
  }
  if (json) {
    print_json({{"experiment", experiment.name},
                {"file", experiment.path},
                {"runs", list},
                {"units", units},
                {"peak_flops", peak > 0 ? nlohmann::json(peak) : nlohmann::json(nullptr)},
                {"assumed_mfu", kCpuEfficiency},
                {"finished_runs", paces.finished.size()},
                {"problems", problems},
                {"estimated_seconds", seconds_json(total_seconds)}});
    return;
  }
  std::cout << fmt::format("experiment {} ({}): {} runs\n", experiment.name, experiment.path, runs.size());
  std::vector<std::vector<std::string>> rows = {
      {"run", "parent (method)", "family", "parameters", "tokens", "FLOPs", "cum. FLOPs", "est."}};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& row = list[i];
    const std::string parent = row["parent"].is_null() ? "-"
                                                       : fmt::format("{} ({})", row["parent"].get<std::string>(),
                                                                     row["growth_method"].get<std::string>());
    rows.push_back({row["name"].get<std::string>(), parent, row["family"].get<std::string>(),
                    grouped(row["parameters"].get<std::int64_t>()), grouped(row["tokens"].get<std::int64_t>()),
                    fmt::format("{:.3e}", row["training_flops"].get<double>()),
                    fmt::format("{:.3e}", row["cumulative_flops"].get<double>()), seconds_cell(estimates[i])});
  }
  std::cout << text_table(rows, {false, false, false, true, true, true, true, true});
  if (!units.empty()) {
    std::vector<std::vector<std::string>> unit_rows = {{"unit", "runs", "finished", "est."}};
    for (const auto& u : units) {
      const bool done = u["finished"].get<bool>();
      unit_rows.push_back({u["name"].get<std::string>(), std::to_string(u["runs"].size()),
                           fmt::format("{} of {}", u["finished_runs"].get<std::size_t>(), u["runs"].size()),
                           done                               ? std::string("done")
                           : u["estimated_seconds"].is_null() ? std::string("-")
                                                              : duration_text(u["estimated_seconds"].get<double>())});
    }
    std::cout << fmt::format("\nunits (tfw run {} --unit NAME):\n", experiment.path)
              << text_table(unit_rows, {false, true, true, true});
  }
  print_estimate_notes(runs, estimates, peak, home);
}

}  // namespace tfw::cli
