// `tfw report EXPERIMENT... [--out DIR]`: the claims report of one or more experiments (see
// workbench/results/report.h); with several, also an index of every claim (DIR/README.md).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "engine/core/files.h"
#include "engine/plugin/registry.h"
#include "engine/machine/runtime.h"
#include "storage/store.h"
#include "workbench/cli/bundle_home.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/results/report.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::vector<std::string> experiments;
  std::string out = "report", home, paper_results, preface, index = "README.md";
  std::vector<std::string> bundles;  // --bundle: read the runs from these instead of a home
};

void run_report(const ReportArgs& args) {
  std::unique_ptr<BundleHome> shipped;
  const std::string home = bundle_or_home(args.bundles, args.home, shipped);
  auto store = Store::open_readonly(home + "/runs.db");
  results::ReportOptions options;
  if (shipped) options.source = shipped->describe();
  options.out_dir = args.out;
  options.paper_results = args.paper_results.empty() ? paper_results_default() : args.paper_results;
  options.tool_version = std::string("tfw ") + TFW_VERSION + ", LibTorch " + torch_version();
  options.command = "tfw report";
  for (const std::string& e : args.experiments) options.command += " " + e;
  for (const std::string& b : args.bundles) options.command += " --bundle " + b;
  if (args.out != "report") options.command += " --out " + args.out;
  if (!args.preface.empty()) {
    std::ifstream in(args.preface);
    if (!in)
      throw UsageError(with_hint(fmt::format("cannot read the preface {}", args.preface), "name a Markdown file"));
    std::stringstream text;
    text << in.rdbuf();
    options.preface = text.str();
  }
  std::error_code ec;
  fs::create_directories(args.out, ec);
  if (ec)
    throw UsageError(
        with_hint(fmt::format("cannot create {}: {}", args.out, ec.message()), "choose a writable folder"));
  // Load and check every experiment before writing anything.
  std::vector<std::unique_ptr<results::ExperimentResults>> sets;
  for (const std::string& e : args.experiments) {
    if (fs::is_regular_file(e)) {
      const DeviceFormOnly form_only;  // a GPU experiment's runs, reported on any machine
      sets.push_back(std::make_unique<results::ExperimentResults>(*store, experiment_load(registry(), e)));
    } else if (e.size() > 5 && e.substr(e.size() - 5) == ".toml") {
      throw UsageError(with_hint(fmt::format("experiment file {} does not exist", e), "check the path"));
    } else {
      sets.push_back(std::make_unique<results::ExperimentResults>(*store, e));
    }
    bool any = false;
    for (const results::RunResult& r : sets.back()->runs()) any = any || r.finished();
    // An experiment run in units ([units]) is reported as it is built up, from its first unit
    // on: before it, its report says what is planned and that nothing has run.
    if (!any && sets.back()->experiment().units.empty()) {
      throw UsageError(with_hint(
          fmt::format("experiment {} has no finished runs in {}", sets.back()->experiment().name, store->path()),
          "run it first: tfw run EXPERIMENT.toml"));
    }
  }
  std::vector<results::ClaimLine> claims;
  std::vector<std::string> written;
  for (const auto& set : sets) {
    const auto judged = results::report_write(*set, options, written);
    claims.insert(claims.end(), judged.begin(), judged.end());
    for (const results::ClaimLine& c : judged)
      std::cout << fmt::format("{}: {}: {}\n", c.experiment, c.verdict, c.claim);
  }
  if (sets.size() > 1 || !args.preface.empty()) {
    const std::string path = (fs::path(args.out) / args.index).string();
    const std::string text = results::report_index(claims, options);
    file_write_durably(path, text.data(), text.size());
    written.push_back(path);
  }
  for (const std::string& w : written) std::cerr << "wrote " << w << "\n";
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = app.add_subcommand(
      "report", "Claims report: for each claim an experiment tests, what was measured and the verdict, with figures");
  command->add_option("experiments", args->experiments, "experiment TOML files (or experiment names in the store)")
      ->required();
  command->add_option("--out", args->out, "the folder to write NAME.md and figures/NAME/ into (default: report)");
  command->add_option("--preface", args->preface, "Markdown put at the top of the index of claims");
  command->add_option("--index", args->index,
                      "the index's file name, written for several experiments (default: README.md)");
  command->add_option("--paper-results", args->paper_results,
                      "the paper's numbers (default: assets/paper_results.toml next to the build)");
  add_home_or_bundle_options(command, args->home, args->bundles);
  command->callback([args] { run_report(*args); });
}

}  // namespace tfw::cli
