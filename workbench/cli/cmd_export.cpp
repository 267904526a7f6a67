// `tfw export EXPERIMENT [--format md|csv|latex] [--table T] [--out FILE] [--curves FILE]`: the
// results table and the cost ledger of an experiment from the store (CSV: one tidy table per
// file, plain numbers, units in the column names; LaTeX: compiles as it is), with the paper's reported
// numbers (assets/paper_results.toml) beside ours where a run mirrors one, labelled with the
// scale each was measured at; loss curves as CSV.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "storage/store.h"
#include "workbench/cli/bundle_home.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/results/figures.h"
#include "workbench/results/results.h"
#include "workbench/results/summary.h"
#include "workbench/results/tables.h"
#include "workbench/results/tracking.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;
using namespace tfw::results;

struct ExportArgs {
  std::string experiment, format = "md", table, out, curves, home, paper_results, figures, tensorboard, mlflow;
  bool no_title = false;             // --no-title: figures without title and caption
  std::vector<std::string> bundles;  // --bundle: read the runs from these instead of a home
};

void run_export(const ExportArgs& args) {
  std::unique_ptr<BundleHome> shipped;
  const std::string home = bundle_or_home(args.bundles, args.home, shipped);
  auto store = Store::open_readonly(home + "/runs.db");
  // EXPERIMENT is a file (then the plan gives order, seeds, parents, paper references and
  // comparisons) or a name in the store.
  std::unique_ptr<ExperimentResults> set;
  if (fs::is_regular_file(args.experiment)) {
    const DeviceFormOnly form_only;  // a GPU experiment's runs, exported on any machine
    set = std::make_unique<ExperimentResults>(*store, experiment_load(registry(), args.experiment));
  } else {
    set = std::make_unique<ExperimentResults>(*store, args.experiment);
  }
  const std::string& name = set->experiment().name;
  bool any = false;
  for (const RunResult& run : set->runs()) any = any || run.record.has_value();
  if (!any && !args.figures.empty() && set->from_file()) {
    // Figures drawn from the configs alone (flops_vs_length) need no runs.
    for (const std::string& written : figures_write(*set, args.figures, !args.no_title))
      std::cerr << "wrote " << written << "\n";
    std::cerr << fmt::format(
        "no runs of experiment '{}' in the store: only the figures (those drawn from its configs "
        "show something)\n",
        name);
    return;
  }
  if (!any) {
    throw UsageError(with_hint(fmt::format("no runs of experiment '{}' in {}", name, store->path()),
                               "run it first with `tfw run EXPERIMENT.toml`"));
  }
  const std::string paper_path = args.paper_results.empty() ? paper_results_default() : args.paper_results;
  RunTables per_run = run_tables(*set, paper_path);
  const std::vector<Table> groups = groups_tables(*set);
  // Comparisons only when their table is shown: the other tables of a batch still running
  // can be exported (a comparison with an empty side is an error).
  const bool wants_comparisons =
      args.table.empty() || args.table == "all" || args.table == "comparisons" || args.table == "comparison_seeds";
  const std::vector<ComparisonResult> comparisons =
      wants_comparisons ? compare_all(*set) : std::vector<ComparisonResult>{};
  Table compared = comparisons_table(name, comparisons);
  const Table evaluated = evaluations_table(*set);
  std::vector<const Table*> all = {&per_run.results};
  for (const Table& g : groups) all.push_back(&g);
  if (!evaluated.rows.empty() || args.table == "evaluations") all.push_back(&evaluated);
  if (!comparisons.empty()) all.push_back(&compared);
  // Per-seed pairs: only when asked for by name (the comparisons table summarises them).
  const Table per_seed = comparison_seeds_table(name, comparisons);
  if (args.table == "comparison_seeds") all.push_back(&per_seed);
  all.push_back(&per_run.ledger);
  std::vector<Table> tables;
  for (const Table* t : all) {
    if (args.table.empty() || args.table == "all" || args.table == t->name) tables.push_back(*t);
  }
  if ((args.table == "comparisons" || args.table == "comparison_seeds") && tables.empty()) {
    throw UsageError(with_hint(fmt::format("experiment {} has no {} table", name, args.table),
                               "comparisons come from [comparisons.NAME] tables of the experiment file"));
  }
  std::string text;
  if (args.format == "csv") {
    // Tidy: one table per file.
    const std::string which = args.table.empty() ? "results" : args.table;
    if (which == "all") {
      throw UsageError(with_hint("CSV holds one table per file",
                                 "choose --table results, groups, groups_accuracy, evaluations, comparisons, "
                                 "comparison_seeds or ledger"));
    }
    text = render_csv(tables.front());
  } else {
    text = args.format == "latex" ? render_latex(tables) : render_md(tables);
    const bool shows_comparisons =
        std::any_of(tables.begin(), tables.end(), [](const Table& t) { return t.name == "comparisons"; });
    if (args.format == "md" && shows_comparisons) {
      for (const ComparisonResult& c : comparisons) {
        for (const std::string& note : c.notes) text += fmt::format("- {}: {}\n", c.spec.name, note);
      }
      if (!comparisons.empty()) text += "\n";
    }
  }
  const bool to_tracker = !args.tensorboard.empty() || !args.mlflow.empty();
  if (args.out.empty() && !to_tracker) {
    std::cout << text;
  } else if (args.out.empty()) {
    // --tensorboard / --mlflow: the tables only where --out says.
  } else {
    std::ofstream(args.out) << text;
    std::cerr << "wrote " << args.out << "\n";
  }
  if (!args.curves.empty()) {
    std::ofstream curves(args.curves);
    curves << "run,key,step,tokens,flops,cumulative_flops,value\n";
    for (const RunResult& run : set->runs()) {
      if (!run.record) continue;
      for (const char* key : {"train/loss", "val/loss"}) {
        for (const MetricPoint& p : store->metrics(run.record->id, key)) {
          // Full precision: the shortest text that reads back to the same double.
          curves << fmt::format("{},{},{},{},{},{},{}\n", run.name, key, p.step, p.tokens, p.flops,
                                std::max(0.0, run.record->inherited_flops) + p.flops,
                                std::isfinite(p.value) ? fmt::format("{}", p.value) : "");
        }
      }
    }
    std::cerr << "wrote " << args.curves << "\n";
  }
  if (!args.figures.empty()) {
    for (const std::string& written : figures_write(*set, args.figures, !args.no_title))
      std::cerr << "wrote " << written << "\n";
  }
  if (!args.tensorboard.empty()) {
    const std::vector<std::string> files = tensorboard_write(*set, args.tensorboard);
    std::cerr << fmt::format("wrote {} TensorBoard event file{} under {} (open: tensorboard --logdir {})\n",
                             files.size(), files.size() == 1 ? "" : "s", args.tensorboard, args.tensorboard);
  }
  if (!args.mlflow.empty()) {
    const std::vector<std::string> runs = mlflow_write(*set, args.mlflow);
    std::cerr << fmt::format(
        "wrote {} MLflow run{} under {} (open: MLFLOW_ALLOW_FILE_STORE=true mlflow ui "
        "--backend-store-uri {})\n",
        runs.size(), runs.size() == 1 ? "" : "s", args.mlflow, args.mlflow);
  }
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* command = app.add_subcommand("export", "Results table and cost ledger of an experiment, and loss curves");
  command->add_option("experiment", args->experiment, "experiment TOML file, or an experiment name in the store")
      ->required();
  command->add_option("--format", args->format, "md, csv or latex")->check(CLI::IsMember({"md", "csv", "latex"}));
  command
      ->add_option("--table", args->table,
                   "results, groups (mean and CI over seeds), groups_accuracy (the same for image classifiers' "
                   "accuracy), evaluations (tfw eval), comparisons, comparison_seeds (each pair, one row per "
                   "seed), ledger or all (default: all; for csv: results)")
      ->check(CLI::IsMember(
          {"results", "groups", "groups_accuracy", "evaluations", "comparisons", "comparison_seeds", "ledger", "all"}));
  command->add_option("--out", args->out, "write the tables to FILE (default: stdout)");
  command->add_option("--curves", args->curves, "write train and val loss curves as CSV to FILE");
  command->add_option("--figures", args->figures, "write the experiment's figures (SVG and PNG) into DIR");
  command->add_flag("--no-title", args->no_title,
                    "figures without their title and caption (for a paper, whose caption says what they show)");
  command->add_option("--tensorboard", args->tensorboard,
                      "write every run's metrics as TensorBoard event files under DIR/EXPERIMENT/RUN (tables then only "
                      "with --out)");
  command->add_option("--mlflow", args->mlflow,
                      "write the runs into an MLflow file store at DIR: params, metrics, tags, lineage (tables then "
                      "only with --out)");
  command->add_option("--paper-results", args->paper_results,
                      "the paper's numbers (default: assets/paper_results.toml next to the build)");
  add_home_or_bundle_options(command, args->home, args->bundles);
  command->callback([args] { run_export(*args); });
}

}  // namespace tfw::cli
