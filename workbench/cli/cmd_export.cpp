// `tfw export EXPERIMENT [--format md|csv|latex] [--table T] [--out FILE] [--curves FILE]`: the
// results table and the cost ledger of an experiment from the store (CSV: one tidy table per
// file, plain numbers, units in the column names; LaTeX: compiles as it is), with the paper's reported
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
  std::string experiment, format = "md", table, out, curves, home, paper_results;
};

// A column: its heading for people (md), for LaTeX (math in math mode), and its name in
// CSV (snake case, the unit in the name, so that every cell is a plain number or word).
struct Column {
  std::string title, latex, csv;
};

// A cell: what people read ("82,048", "136 s") and the machine-readable value ("82048",
// "136"); empty raw for a missing value.
struct Cell {
  std::string text, raw;
};

Cell text_cell(const std::string& text) { return {text, text == "-" ? "" : text}; }

struct Table {
  std::string name;   // "results", "ledger"
  std::string title;
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
};

std::string render_md(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    out << "### " << t.title << "\n\n|";
    for (const Column& c : t.columns) out << " " << c.title << " |";
    out << "\n|";
    for (std::size_t i = 0; i < t.columns.size(); ++i) out << "---|";
    out << "\n";
    for (const auto& row : t.rows) {
      out << "|";
      for (const Cell& cell : row) out << " " << cell.text << " |";
      out << "\n";
    }
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

// One tidy table: a header row of column names, then one row per run of plain values.
std::string render_csv(const Table& t) {
  std::ostringstream out;
  for (std::size_t i = 0; i < t.columns.size(); ++i) out << (i ? "," : "") << csv_cell(t.columns[i].csv);
  out << "\n";
  for (const auto& row : t.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_cell(row[i].raw);
    out << "\n";
  }
  return out.str();
}

std::string latex_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '_': case '%': case '&': case '#': case '$': case '{': case '}':
        out += '\\';
        out += c;
        break;
      case '^': out += "\\^{}"; break;
      case '~': out += "\\~{}"; break;
      case '\\': out += "\\textbackslash{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '<': out += "\\textless{}"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_latex(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    out << "% " << t.title << "\n\\begin{tabular}{" << std::string(t.columns.size(), 'l') << "}\n\\hline\n";
    for (std::size_t i = 0; i < t.columns.size(); ++i) out << (i ? " & " : "") << t.columns[i].latex;
    out << " \\\\\n\\hline\n";
    for (const auto& row : t.rows) {
      for (std::size_t i = 0; i < row.size(); ++i) out << (i ? " & " : "") << latex_escape(row[i].text);
      out << " \\\\\n";
    }
    out << "\\hline\n\\end{tabular}\n\n";
  }
  return out.str();
}

Column column(const std::string& title, const std::string& csv) { return {title, latex_escape(title), csv}; }

double final_metric(const RunRecord& r, const char* key) {
  nlohmann::json metrics = nlohmann::json::parse(r.final_metrics, nullptr, false);
  if (metrics.is_discarded() || !metrics.contains(key) || !metrics[key].is_number()) return std::nan("");
  return metrics[key].get<double>();
}

bool json_flag(const RunRecord& r, const char* key) {
  nlohmann::json metrics = nlohmann::json::parse(r.final_metrics, nullptr, false);
  return metrics.is_object() && metrics.contains(key) && metrics[key].is_boolean() && metrics[key].get<bool>();
}

// A number shown with `format`, kept exactly for CSV (the shortest text that reads back as
// the same double).
Cell number(double value, const char* format = "{:.4f}") {
  if (!std::isfinite(value)) return {"-", ""};
  return {fmt::format(fmt::runtime(format), value), fmt::format("{}", value)};
}

Cell count(std::int64_t value) { return {grouped(value), std::to_string(value)}; }

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

  Table results{"results", fmt::format("{}: results (measured here; paper numbers at the paper's scale)", name),
                {column("run", "run"), column("family", "family"), column("grown from", "parent"),
                 column("growth", "growth_method"), column("parameters", "parameters"), column("tokens", "tokens"),
                 column("val loss", "val_loss"), column("val ppl", "val_perplexity"),
                 {"token-token FLOPs (10^4 T^2)", "token-token FLOPs ($10^4\\,T^2$)", "token_token_flops_per_1e4_t2"},
                 column("status", "status"), column("paper value", "paper_value"), column("paper metric", "paper_metric"),
                 column("paper source", "paper_source"), column("paper scale", "paper_scale")},
                {}};
  Table ledger{"ledger", fmt::format("{}: cost ledger", name),
               {column("run", "run"), column("parameters", "parameters"), column("tokens", "tokens"),
                column("stage FLOPs", "stage_flops"), column("cumulative FLOPs", "cumulative_flops"),
                column("wall time (s)", "wall_seconds"), column("other CPU share", "other_cpu_share"),
                column("contended", "contended"), column("machine", "host")},
               {}};
  const Cell none{"-", ""};
  for (const auto& [run_name, paper_key] : order) {
    auto found = by_name.find(run_name);
    if (found == by_name.end()) {
      std::vector<Cell> row(results.columns.size(), none);
      row[0] = text_cell(run_name);
      row[9] = text_cell("not run");
      results.rows.push_back(row);
      continue;
    }
    const RunRecord& r = found->second;
    const double val = final_metric(r, "val_loss");
    std::vector<Cell> paper_cells(4, none);
    if (!paper_key.empty()) {
      const toml::node* entry = toml::at_path(paper, paper_key).node();
      if (entry == nullptr || !entry->is_table()) {
        throw UsageError(fmt::format("run {}: paper result '{}' is not in {}", run_name, paper_key, paper_path));
      }
      const toml::table& p = *entry->as_table();
      paper_cells = {number(p["value"].value_or(std::nan("")), "{}"), text_cell(p["metric"].value_or(std::string("-"))),
                     text_cell(p["source"].value_or(std::string("-"))), text_cell(p["scale"].value_or(std::string("-")))};
    }
    const Cell parent = r.parent != 0 ? text_cell(name_of.count(r.parent) ? name_of[r.parent] : std::to_string(r.parent))
                                      : none;
    // Paper Table 8's unit: the token-token term per sequence over 10^4·T² = 4·L·d_attn / 10^4.
    Cell token_token = none;
    try {
      ModelConfig model = model_config_parse(registry(), toml::parse(r.config, r.name), r.name);
      token_token = number(static_cast<double>(model.spec->flops_per_token(1).token_token) / 1e4);
    } catch (const std::exception&) {
      // a config this build cannot parse (another plugin set): leave the cell empty
    }
    std::vector<Cell> row = {text_cell(r.name), text_cell(r.family), parent,
                             r.growth_method.empty() ? none : text_cell(r.growth_method), count(r.parameters),
                             count(r.tokens), number(val), number(std::exp(val), "{:.2f}"), token_token,
                             text_cell(r.status)};
    row.insert(row.end(), paper_cells.begin(), paper_cells.end());
    results.rows.push_back(row);
    const double wall = r.ended > r.started ? r.ended - r.started : 0;
    ledger.rows.push_back({text_cell(r.name), count(r.parameters), count(r.tokens), number(r.flops, "{:.3e}"),
                           number(r.cumulative_flops, "{:.3e}"), number(wall, "{:.0f}"),
                           number(final_metric(r, "other_cpu_share"), "{:.2f}"),
                           text_cell(std::isfinite(final_metric(r, "other_cpu_share"))
                                         ? (json_flag(r, "contended") ? "yes" : "no")
                                         : "-"),
                           text_cell(r.host)});
  }
  std::vector<Table> tables;
  for (const Table* t : {&results, &ledger}) {
    if (args.table.empty() || args.table == "all" || args.table == t->name) tables.push_back(*t);
  }
  std::string text;
  if (args.format == "csv") {
    // Tidy: one table per file.
    const std::string which = args.table.empty() ? "results" : args.table;
    if (which == "all") {
      throw UsageError(with_hint("CSV holds one table per file", "choose --table results or --table ledger"));
    }
    text = render_csv(which == "ledger" ? ledger : results);
  } else {
    text = args.format == "latex" ? render_latex(tables) : render_md(tables);
  }
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
  command->add_option("--table", args->table, "results, ledger or all (default: all; for csv: results)")
      ->check(CLI::IsMember({"results", "ledger", "all"}));
  command->add_option("--out", args->out, "write the tables to FILE (default: stdout)");
  command->add_option("--curves", args->curves, "write train and val loss curves as CSV to FILE");
  command->add_option("--paper-results", args->paper_results,
                      "the paper's numbers (default: assets/paper_results.toml next to the build)");
  command->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
  command->callback([args] { run_export(*args); });
}

}  // namespace tfw::cli
