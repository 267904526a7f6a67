// `tfw export EXPERIMENT [--format md|csv|latex] [--out FILE] [--curves FILE]`: the results
// table and the cost ledger of an experiment from the store, with the paper's reported
// numbers (assets/paper_results.toml) beside ours where a run mirrors one, labelled with the
// scale each was measured at; loss curves as CSV.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/error.h"
#include "engine/experiment.h"
#include "engine/home.h"
#include "engine/registry.h"
#include "engine/run_config.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

struct ExportArgs {
  std::string experiment, format = "md", out, curves, home, paper_results;
};

struct Table {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

std::string render_md(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    out << "### " << t.title << "\n\n| " << fmt::format("{}", fmt::join(t.header, " | ")) << " |\n|";
    for (std::size_t i = 0; i < t.header.size(); ++i) out << "---|";
    out << "\n";
    for (const auto& row : t.rows) out << "| " << fmt::format("{}", fmt::join(row, " | ")) << " |\n";
    out << "\n";
  }
  return out.str();
}

std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string render_csv(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    out << "table";
    for (const std::string& h : t.header) out << "," << csv_cell(h);
    out << "\n";
    for (const auto& row : t.rows) {
      out << csv_cell(t.title);
      for (const std::string& cell : row) out << "," << csv_cell(cell);
      out << "\n";
    }
  }
  return out.str();
}

std::string latex_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '_' || c == '%' || c == '&' || c == '#' || c == '$') out += '\\';
    out += c;
  }
  return out;
}

std::string render_latex(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    out << "% " << t.title << "\n\\begin{tabular}{" << std::string(t.header.size(), 'l') << "}\n\\hline\n";
    std::vector<std::string> header;
    for (const std::string& h : t.header) header.push_back(latex_escape(h));
    out << fmt::format("{}", fmt::join(header, " & ")) << " \\\\\n\\hline\n";
    for (const auto& row : t.rows) {
      std::vector<std::string> cells;
      for (const std::string& c : row) cells.push_back(latex_escape(c));
      out << fmt::format("{}", fmt::join(cells, " & ")) << " \\\\\n";
    }
    out << "\\hline\n\\end{tabular}\n\n";
  }
  return out.str();
}

double final_metric(const RunRecord& r, const char* key) {
  nlohmann::json metrics = nlohmann::json::parse(r.final_metrics, nullptr, false);
  if (metrics.is_discarded() || !metrics.contains(key) || !metrics[key].is_number()) return std::nan("");
  return metrics[key].get<double>();
}

std::string number(double value, const char* format = "{:.4f}") {
  return std::isfinite(value) ? fmt::format(fmt::runtime(format), value) : "-";
}

void run_export(const ExportArgs& args) {
  const std::string home = home_resolve(args.home);
  // EXPERIMENT is a file (then the plan gives order, parents and paper references) or a name.
  std::string name = args.experiment;
  std::vector<std::pair<std::string, std::string>> order;  // run name, paper key
  if (fs::is_regular_file(args.experiment)) {
    Experiment experiment = experiment_load(registry(), args.experiment);
    name = experiment.name;
    for (const ExperimentRun& run : experiment.runs) order.emplace_back(run.name, run.paper);
  }
  auto store = Store::open_readonly(home + "/runs.db");
  std::vector<RunRecord> records = store->runs({name, "", "", "id", false});
  if (records.empty()) {
    throw UsageError(with_hint(fmt::format("no runs of experiment '{}' in {}", name, store->path()),
                               "run it first with `tfw run EXPERIMENT.toml`"));
  }
  if (order.empty()) {
    for (const RunRecord& r : records) order.emplace_back(r.name, "");
  }
  std::map<std::string, RunRecord> by_name;
  std::map<std::int64_t, std::string> name_of;
  for (const RunRecord& r : records) {
    by_name[r.name] = r;
    name_of[r.id] = r.name;
  }
  const std::string paper_path = args.paper_results.empty()
                                     ? executable_dir() + "/../assets/paper_results.toml"
                                     : args.paper_results;
  toml::table paper;
  if (fs::exists(paper_path)) paper = toml::parse_file(paper_path);

  Table results{fmt::format("{}: results (measured here; paper numbers at the paper's scale)", name),
                {"run", "family", "grown from", "parameters", "tokens", "val loss", "val ppl",
                 "token-token FLOPs (10^4 T^2)", "status", "paper (its scale)"},
                {}};
  Table ledger{fmt::format("{}: cost ledger", name),
               {"run", "parameters", "tokens", "stage FLOPs", "cumulative FLOPs", "wall time", "machine"},
               {}};
  for (const auto& [run_name, paper_key] : order) {
    auto found = by_name.find(run_name);
    if (found == by_name.end()) {
      results.rows.push_back({run_name, "-", "-", "-", "-", "-", "-", "-", "not run", "-"});
      continue;
    }
    const RunRecord& r = found->second;
    const double val = final_metric(r, "val_loss");
    std::string paper_cell = "-";
    if (!paper_key.empty()) {
      const toml::node* entry = toml::at_path(paper, paper_key).node();
      if (entry == nullptr || !entry->is_table()) {
        throw UsageError(fmt::format("run {}: paper result '{}' is not in {}", run_name, paper_key, paper_path));
      }
      const toml::table& p = *entry->as_table();
      paper_cell = fmt::format("{} {} ({}; {})", p["value"].value_or(0.0), p["metric"].value_or(std::string("")),
                               p["source"].value_or(std::string("")), p["scale"].value_or(std::string("")));
    }
    const std::string parent = r.parent != 0 ? fmt::format("{} ({})", name_of.count(r.parent) ? name_of[r.parent]
                                                                                                : std::to_string(r.parent),
                                                           r.growth_method)
                                             : "-";
    // Paper Table 8's unit: the token-token term per sequence over 10^4·T² = 4·L·d_attn / 10^4.
    std::string token_token = "-";
    try {
      ModelConfig model = model_config_parse(registry(), toml::parse(r.config, r.name), r.name);
      token_token = fmt::format("{:.4f}", static_cast<double>(model.spec->flops_per_token(1).token_token) / 1e4);
    } catch (const std::exception&) {
      // a config this build cannot parse (another plugin set): leave the cell empty
    }
    results.rows.push_back({r.name, r.family, parent, grouped(r.parameters), grouped(r.tokens), number(val),
                            number(std::exp(val), "{:.2f}"), token_token, r.status, paper_cell});
    const double wall = r.ended > r.started ? r.ended - r.started : 0;
    ledger.rows.push_back({r.name, grouped(r.parameters), grouped(r.tokens), number(r.flops, "{:.3e}"),
                           number(r.cumulative_flops, "{:.3e}"), fmt::format("{:.0f} s", wall), r.host});
  }
  std::vector<Table> tables = {results, ledger};
  std::string text = args.format == "csv" ? render_csv(tables) : args.format == "latex" ? render_latex(tables)
                                                                                         : render_md(tables);
  if (args.out.empty()) {
    std::cout << text;
  } else {
    std::ofstream(args.out) << text;
    std::cerr << "wrote " << args.out << "\n";
  }
  if (!args.curves.empty()) {
    std::ofstream curves(args.curves);
    curves << "run,key,step,tokens,flops,cumulative_flops,value\n";
    for (const auto& [run_name, paper_key] : order) {
      auto found = by_name.find(run_name);
      if (found == by_name.end()) continue;
      for (const char* key : {"train/loss", "val/loss"}) {
        for (const MetricPoint& p : store->metrics(found->second.id, key)) {
          curves << fmt::format("{},{},{},{},{:.6e},{:.6e},{}\n", run_name, key, p.step, p.tokens, p.flops,
                                found->second.inherited_flops + p.flops, std::isfinite(p.value) ? fmt::format("{:.6g}", p.value) : "");
        }
      }
    }
    std::cerr << "wrote " << args.curves << "\n";
  }
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* command = app.add_subcommand("export", "Results table and cost ledger of an experiment, and loss curves");
  command->add_option("experiment", args->experiment, "experiment TOML file, or an experiment name in the store")
      ->required();
  command->add_option("--format", args->format, "md, csv or latex")->check(CLI::IsMember({"md", "csv", "latex"}));
  command->add_option("--out", args->out, "write the tables to FILE (default: stdout)");
  command->add_option("--curves", args->curves, "write train and val loss curves as CSV to FILE");
  command->add_option("--paper-results", args->paper_results,
                      "the paper's numbers (default: assets/paper_results.toml next to the build)");
  command->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
  command->callback([args] { run_export(*args); });
}

}  // namespace tfw::cli
