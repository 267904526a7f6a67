// `tfw runs list|show|compare|diff`: the run store, read-only; `tfw runs delete`: remove records;
// `tfw runs export|import`: run bundles (runner/bundle.h).
#include <cmath>
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "engine/config/config_diff.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "runner/run_lock.h"
#include "runner/bundle.h"
#include "storage/store.h"
#include "workbench/results/results.h"
#include "workbench/results/summary.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/common/first_steps.h"
#include "workbench/common/records_json.h"

namespace tfw {
// An evaluation in `tfw runs show --json` (docs/cli.md): its fields but the store's ids.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EvaluationRow, step, corpus, metric, value, windows, tokens, mode, blocks,
                                   checkpoint, created)
}  // namespace tfw

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

struct RunsArgs {
  std::string home;
  RunFilter filter;
  std::string status;  // --status, parsed into filter.status
  std::vector<std::string> runs;
  bool json = false;
  bool files = false;
  bool all_keys = false;      // compare: every config key, not only those that differ
  std::string out;            // export: the bundle file
  std::string bundle;         // import: the bundle file
  runner::BundleExport what;  // export: --experiment, --checkpoints
};

std::string metric(const RunRecord& r, const char* key) {
  const std::optional<double> value = r.final_metrics.number(key);
  return value ? fmt::format("{:.4f}", *value) : "-";
}

// A final metric as a person reads it: integers grouped, other numbers to 6 significant
// digits, booleans as yes/no, "-" when the run has none.
std::string metric_value_text(const FinalValue& v) {
  using Kind = FinalValue::Kind;
  if (v.kind == Kind::flag) return v.flag ? "yes" : "no";
  if (v.kind == Kind::integer) return grouped(v.integer);
  if (v.kind == Kind::number) {
    const double d = v.number;
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) return grouped(static_cast<std::int64_t>(d));
    return fmt::format("{:.6g}", d);
  }
  return v.text;  // a string, or the JSON of anything else
}

std::string metric_text(const RunRecord& r, const std::string& key) {
  const FinalValue* value = r.final_metrics.find(key);
  return value == nullptr ? "-" : metric_value_text(*value);
}

std::unique_ptr<Store> open_store(const std::string& home) { return Store::open_readonly(home + "/runs.db"); }

RunRecord find(Store& store, const std::string& run) {
  std::optional<RunRecord> record = store.run_find(run);
  if (!record) {
    throw UsageError(with_hint(fmt::format("no run '{}' in {}", run, store.path()), "list them with `tfw runs list`"));
  }
  if (record->name == run) {  // by name: say so when the name is not unique
    std::vector<std::string> others;
    for (const RunRecord& r : store.runs()) {
      if (r.name == run && r.id != record->id) others.push_back(fmt::format("{} ({})", r.id, r.experiment));
    }
    if (!others.empty()) {
      std::cerr << fmt::format(
          "note: '{}' names {} runs; this is the newest, id {} (experiment {}). Others: {}. "
          "Pass an id to choose.\n",
          run, others.size() + 1, record->id, record->experiment, fmt::join(others, ", "));
    }
  }
  return *record;
}

void run_list(const RunsArgs& args) {
  RunFilter filter = args.filter;
  if (!args.status.empty()) {
    filter.status = run_status_parse(args.status);
    if (!filter.status) {
      throw UsageError(
          with_hint(fmt::format("--status '{}' is not a run status", args.status), "choose " + run_status_choices()));
    }
  }
  // --sort: a column of the store, or any final metric (val_loss, tokens_per_second, mfu, ...):
  // runs without that metric come last, in id order.
  static const std::set<std::string> columns = {
      "id", "name", "started", "tokens", "flops", "cumulative_flops", "parameters", "family", "status"};
  const std::string by_metric = columns.count(filter.sort) ? "" : filter.sort;
  if (!by_metric.empty()) filter.sort = "id";
  const std::string home = home_resolve(args.home);
  if (!fs::exists(home + "/runs.db")) {
    throw UsageError(with_hint(fmt::format("no store at '{}/runs.db'", home),
                               fmt::format("runs are recorded there by `tfw train` (a first one, from the "
                                           "repository's folder: {} --home {}); or check --home / TFW_HOME",
                                           kFirstTrainCommand, home)));
  }
  auto store = open_store(home);
  std::vector<RunRecord> runs = store->runs(filter);
  if (!by_metric.empty()) {
    std::set<std::string> known;
    auto value = [&](const RunRecord& r) -> std::optional<double> {
      for (const auto& [key, v] : r.final_metrics.entries()) {
        if (v.is_number()) known.insert(key);
      }
      return r.final_metrics.number(by_metric);
    };
    std::vector<std::pair<std::optional<double>, RunRecord>> keyed;
    for (RunRecord& r : runs) keyed.emplace_back(value(r), std::move(r));
    if (!keyed.empty() && std::none_of(keyed.begin(), keyed.end(), [](const auto& k) { return k.first.has_value(); })) {
      throw UsageError(with_hint(
          fmt::format("cannot sort runs by '{}': it is neither a column nor a final metric of "
                      "any listed run",
                      by_metric),
          fmt::format("sort by a column (id, name, family, status, started, tokens, flops, "
                      "cumulative_flops, parameters) or a final metric ({})",
                      known.empty() ? std::string("none recorded yet") : fmt::format("{}", fmt::join(known, ", ")))));
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      if (a.first.has_value() != b.first.has_value()) return a.first.has_value();
      if (!a.first) return false;
      return filter.descending ? *a.first > *b.first : *a.first < *b.first;
    });
    runs.clear();
    for (auto& [v, r] : keyed) runs.push_back(std::move(r));
  }
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const RunRecord& r : runs) list.push_back(run_json(r));
    print_json({{"runs", list}});
    return;
  }
  if (runs.empty()) {
    std::cout << fmt::format("(no runs in {})\nstart one from the repository's folder: {}\n", store->path(),
                             kFirstTrainCommand);
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"id", "experiment", "name", "family", "status", "params", "tokens",
                                                 "FLOPs", "cum. FLOPs", "val loss", "started"}};
  if (!by_metric.empty()) rows.front().insert(rows.front().begin() + 10, by_metric);
  for (const RunRecord& r : runs) {
    rows.push_back({std::to_string(r.id), r.experiment, r.name, r.family, status_name(r.status),
                    short_count(r.parameters), grouped(r.tokens), fmt::format("{:.3e}", r.flops),
                    fmt::format("{:.3e}", r.cumulative_flops), metric(r, "val_loss"), local_time(r.started)});
    if (!by_metric.empty()) rows.back().insert(rows.back().begin() + 10, metric_text(r, by_metric));
  }
  std::vector<bool> right = {true, false, false, false, false, true, true, true, true, true, false};
  if (!by_metric.empty()) right.insert(right.begin() + 10, true);
  std::cout << text_table(rows, right);
}

void run_show(const RunsArgs& args) {
  auto store = open_store(home_resolve(args.home));
  RunRecord r = find(*store, args.runs.front());
  std::vector<RunRecord> lineage = store->lineage(r.id);
  std::vector<CheckpointRow> checkpoints = store->checkpoints(r.id);
  std::vector<EventRow> events = store->events(r.id);
  const std::vector<EvaluationRow> evaluations = store->evaluations(r.id);
  if (args.json) {
    nlohmann::json json = run_json(r);
    json["config"] = r.config;
    nlohmann::json chain = nlohmann::json::array();
    for (const RunRecord& ancestor : lineage) {
      chain.push_back({{"id", ancestor.id},
                       {"name", ancestor.name},
                       {"flops", ancestor.flops},
                       {"cumulative_flops", ancestor.cumulative_flops},
                       {"growth_method", ancestor.growth_method}});
    }
    json["lineage"] = chain;
    nlohmann::json saved = nlohmann::json::array();
    for (const CheckpointRow& c : checkpoints) {
      saved.push_back({{"step", c.step}, {"path", c.path}, {"checksum", c.checksum}, {"bytes", c.bytes}});
    }
    json["checkpoints"] = saved;
    json["metric_points"] = store->metrics_count(r.id);
    json["events"] = events.size();
    json["evaluations"] = evaluations;  // an array, [] when none; a NaN value prints as null
    print_json(json);
    return;
  }
  std::cout << fmt::format("run {} '{}' ({}), experiment '{}': {}\n", r.id, r.name, r.family, r.experiment,
                           status_name(r.status));
  const bool ended = r.ended > 0 && r.ended >= r.started;
  std::cout << fmt::format(
      "  started {}  ended {}  duration {}  host {}  git {}  seed {}\n", local_time(r.started), local_time(r.ended),
      ended ? duration_text(r.ended - r.started) : fmt::format("{} so far", duration_text(r.heartbeat - r.started)),
      r.host, r.git_commit, r.seed);
  std::cout << fmt::format("  parameters {}  tokens {}  own FLOPs {:.3e}  cumulative FLOPs {:.3e}\n",
                           grouped(r.parameters), grouped(r.tokens), r.flops, r.cumulative_flops);
  const FinalMetrics& finals = r.final_metrics;
  if (finals.empty()) {
    std::cout << "  final metrics: none yet\n";
  } else {
    std::cout << "  final metrics:\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& [key, value] : finals.entries()) rows.push_back({"   ", key, metric_value_text(value)});
    std::cout << text_table(rows, {false, false, true});
  }
  if (!r.error.empty()) std::cout << "  error: " << r.error << "\n";
  std::cout << "  lineage:";
  for (const RunRecord& ancestor : lineage) {
    std::cout << fmt::format(" {} {}({:.3e} FLOPs{})", ancestor.id == lineage.front().id ? "" : "->", ancestor.name,
                             ancestor.flops, ancestor.growth_method.empty() ? "" : ", " + ancestor.growth_method);
  }
  if (!r.growth_method.empty()) {
    // How it was grown: the method and its options (a growth script's path and SHA-256).
    std::string options = r.growth_options;
    for (std::size_t at; (at = options.find('\n')) != std::string::npos;) options.replace(at, 1, ", ");
    std::cout << fmt::format("\n  grown with: {}{}", r.growth_method, options.empty() ? "" : " (" + options + ")");
  }
  std::cout << "\n  checkpoints:\n";
  for (const CheckpointRow& c : checkpoints) {
    std::cout << fmt::format("    step {:>8}  {}  {}  {}\n", c.step, grouped(c.bytes), c.checksum, c.path);
  }
  if (!evaluations.empty()) {
    std::cout << "  evaluations (tfw eval):\n";
    for (const EvaluationRow& e : evaluations) {
      if (e.metric != "loss" && e.metric != "bits_per_byte" && e.metric.rfind("cloze", 0) != 0) continue;
      std::cout << fmt::format("    step {:>8}  {:<16} {:<10} {:<14} {:.4f}  ({} windows, {} tokens{})\n", e.step,
                               e.corpus, e.mode, e.metric, e.value, e.windows, grouped(e.tokens),
                               e.blocks.empty() ? "" : "; parameter blocks " + e.blocks);
    }
  }
  std::cout << fmt::format("  {} metric points, {} events; run folder {}\n", store->metrics_count(r.id), events.size(),
                           r.run_dir);
  std::cout << "  config:\n";
  std::istringstream config(toml_as_written(r.config));  // floats as written: 0.9, not 0.90000000000000002
  for (std::string line; std::getline(config, line);) std::cout << "    " << line << "\n";
}

// Final validation losses of a group's runs.
std::vector<double> group_losses(const results::SeedGroup& g) {
  std::vector<double> values;
  for (const RunRecord* r : g.runs) {
    if (const std::optional<double> loss = r->final_metrics.number("val_loss")) values.push_back(*loss);
  }
  return values;
}

nlohmann::json groups_json(const std::vector<results::SeedGroup>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const results::SeedGroup& g : groups) {
    nlohmann::json ids = nlohmann::json::array();
    for (const RunRecord* r : g.runs) ids.push_back(r->id);
    nlohmann::json entry = {{"label", g.label}, {"runs", ids}};
    const std::vector<double> values = group_losses(g);
    if (!values.empty()) {
      const analysis::MeanInterval m = analysis::mean_interval(values);
      entry["val_loss_mean"] = m.mean;
      entry["n"] = m.n;
      entry["val_loss_sd"] = m.has_interval() ? nlohmann::json(m.sd) : nlohmann::json(nullptr);
      entry["val_loss_ci95"] =
          m.has_interval() ? nlohmann::json({m.low, m.high}) : nlohmann::json(nullptr);  // n = 1: none
    }
    out.push_back(entry);
  }
  return out;
}

void run_compare(const RunsArgs& args) {
  auto store = open_store(home_resolve(args.home));
  std::vector<RunRecord> runs;
  for (const std::string& run : args.runs) runs.push_back(find(*store, run));
  // Runs that differ only in seed, with the mean and 95% CI of their final validation loss.
  const std::vector<results::SeedGroup> groups = results::group_by_seed(runs);
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const RunRecord& r : runs) list.push_back(run_json(r));
    print_json({{"runs", list}, {"groups", groups_json(groups)}});
    return;
  }
  // One table: a label column and one column per run, each as wide as its widest cell (no
  // name is cut).
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& label, auto&& cell) {
    rows.push_back({label});
    for (const RunRecord& r : runs) rows.back().push_back(cell(r));
  };
  row("run", [](const RunRecord& r) { return fmt::format("{} {}", r.id, r.name); });
  row("family", [](const RunRecord& r) { return r.family; });
  row("status", [](const RunRecord& r) { return std::string(status_name(r.status)); });
  row("parameters", [](const RunRecord& r) { return grouped(r.parameters); });
  row("tokens", [](const RunRecord& r) { return grouped(r.tokens); });
  row("own FLOPs", [](const RunRecord& r) { return fmt::format("{:.3e}", r.flops); });
  row("cumulative FLOPs", [](const RunRecord& r) { return fmt::format("{:.3e}", r.cumulative_flops); });
  row("val loss", [](const RunRecord& r) { return metric(r, "val_loss"); });
  row("best val loss", [](const RunRecord& r) { return metric(r, "best_val_loss"); });
  row("train loss", [](const RunRecord& r) { return metric(r, "train_loss"); });
  row("tokens/s", [](const RunRecord& r) {
    const std::optional<double> rate = r.final_metrics.number("tokens_per_second");
    if (!rate) return std::string("-");
    return grouped(static_cast<std::int64_t>(std::llround(*rate)));
  });
  row("host", [](const RunRecord& r) { return r.host; });
  // Config keys: those that differ between the runs (every key with --all-keys), floats as written.
  std::vector<std::map<std::string, std::string>> configs;
  std::set<std::string> keys;
  for (const RunRecord& r : runs) {
    configs.push_back(config_flatten(r.config, fmt::format("run {}'s config", r.id)));
    for (auto& [key, value] : configs.back()) value = toml_value_as_written(value);
    for (const auto& [key, value] : configs.back()) keys.insert(key);
  }
  const std::size_t fixed_rows = rows.size();
  std::size_t shown = 0;
  for (const std::string& key : keys) {
    std::set<std::string> values;
    for (const auto& c : configs) values.insert(c.count(key) ? c.at(key) : "-");
    if (values.size() < 2 && !args.all_keys) continue;
    ++shown;
    rows.push_back({"  " + key});
    for (const auto& c : configs) rows.back().push_back(c.count(key) ? c.at(key) : "-");
  }
  const std::vector<bool> right(runs.size() + 1, true);
  std::vector<bool> aligned = right;
  aligned[0] = false;
  const std::string table = text_table(rows, aligned);
  // The config rows under their own heading, in the same columns.
  std::size_t line = 0, at = 0;
  for (; line < fixed_rows && at != std::string::npos; ++line) at = table.find('\n', at) + 1;
  std::cout << table.substr(0, at);
  if (shown > 0) {
    std::cout << (args.all_keys ? "config:\n" : "config keys that differ (--all-keys: every key):\n")
              << table.substr(at);
  }
  if (shown == 0) std::cout << "config: the same for every run\n";
  if (groups.size() == runs.size()) return;  // no two runs differ only in seed
  std::cout << "\ngroups that differ only in seed (final val loss, mean and 95% Student-t CI):\n";
  for (const results::SeedGroup& g : groups) {
    const std::vector<double> values = group_losses(g);
    std::string ids;
    for (const RunRecord* r : g.runs) ids += (ids.empty() ? "" : ",") + std::to_string(r->id);
    std::cout << fmt::format(
        "  {:<28} runs {:<12} {}\n", g.label, ids,
        values.empty() ? std::string("no val loss") : results::mean_text(analysis::mean_interval(values)));
  }
}

// Deletes runs' records (metrics, checkpoints, events) and, with --files, their folders when
// they lie inside TFW_HOME. Refuses a running run and a run that others were grown from.
void run_delete(const RunsArgs& args) {
  auto store = Store::open(home_resolve(args.home) + "/runs.db");
  std::vector<RunRecord> doomed;
  for (const std::string& run : args.runs) doomed.push_back(find(*store, run));
  // A run that a process trains holds its lock (runner/run_lock.h) from before its record says
  // "running": a resume that started a moment ago is refused here, not deleted under it.
  std::vector<std::unique_ptr<runner::RunLock>> held;
  for (const RunRecord& r : doomed) {
    if (!r.run_dir.empty() && path_inside(r.run_dir, store->home()) && fs::is_directory(r.run_dir)) {
      held.push_back(runner::RunLock::hold(r.run_dir, fmt::format("{} '{}'", r.id, r.name)));
    }
  }
  for (const RunRecord& r : doomed) {
    if (r.status == RunStatus::running) {
      throw UsageError(with_hint(fmt::format("run {} '{}' is running; nothing was deleted", r.id, r.name),
                                 "stop it first (Ctrl-C, or `tfw cancel JOB` for a service job)"));
    }
    for (const RunRecord& child : store->run_children(r.id)) {
      const bool also = std::any_of(doomed.begin(), doomed.end(), [&](const RunRecord& d) { return d.id == child.id; });
      if (!also) {
        throw UsageError(with_hint(fmt::format("run {} '{}' has run {} '{}' grown from it; nothing was deleted", r.id,
                                               r.name, child.id, child.name),
                                   "delete the grown runs too (name them all), or keep this one"));
      }
    }
  }
  // Children before parents (the lineage's foreign keys).
  std::sort(doomed.begin(), doomed.end(), [](const RunRecord& a, const RunRecord& b) { return a.id > b.id; });
  for (const RunRecord& r : doomed) {
    store->run_delete(r.id);
    std::string files = "its files were kept";
    if (args.files && !r.run_dir.empty()) {
      const std::string dir = fs::weakly_canonical(r.run_dir).string();
      if (dir.rfind(store->home() + "/", 0) == 0) {
        std::error_code ec;
        fs::remove_all(dir, ec);
        files = ec ? fmt::format("its folder {} could not be removed: {}", dir, ec.message())
                   : fmt::format("its folder {} was removed", dir);
      } else {
        files = fmt::format("its folder {} is outside TFW_HOME and was kept", dir);
      }
    } else if (!r.run_dir.empty()) {
      files = fmt::format("its folder {} was kept (--files removes it)", r.run_dir);
    }
    std::cout << fmt::format("deleted run {} '{}' ({}); {}\n", r.id, r.name, r.experiment, files);
  }
}

// The config keys that differ between two runs.
void run_diff(const RunsArgs& args) {
  if (args.runs.size() != 2) throw UsageError(with_hint("tfw runs diff compares two runs", "tfw runs diff A B"));
  auto store = open_store(home_resolve(args.home));
  const RunRecord a = find(*store, args.runs[0]), b = find(*store, args.runs[1]);
  const std::vector<ConfigDifference> differences = config_differences(a.config, b.config);
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const ConfigDifference& d : differences) {
      list.push_back({{"key", d.key},
                      {"a", d.a.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.a)},
                      {"b", d.b.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.b)}});
    }
    print_json({{"a", a.id}, {"b", b.id}, {"differences", list}});
    return;
  }
  const std::string la = fmt::format("{} {}", a.id, a.name), lb = fmt::format("{} {}", b.id, b.name);
  if (differences.empty()) {
    std::cout << fmt::format("runs {} and {} have the same config\n", la, lb);
    return;
  }
  std::size_t width = 3;
  for (const ConfigDifference& d : differences) width = std::max(width, d.key.size());
  std::size_t width_a = la.size();
  for (const ConfigDifference& d : differences) width_a = std::max(width_a, d.a.size());
  std::cout << fmt::format("{:<{}}  {:<{}}  {}\n", "key", width, la, width_a, lb);
  for (const ConfigDifference& d : differences) {
    std::cout << fmt::format("{:<{}}  {:<{}}  {}\n", d.key, width, d.a.empty() ? "-" : d.a, width_a,
                             d.b.empty() ? "-" : d.b);
  }
}

void run_export(const RunsArgs& args) {
  auto store = open_store(home_resolve(args.home));
  runner::BundleExport what = args.what;
  what.runs = args.runs;
  const runner::BundleSummary s = runner::bundle_export(*store, what, args.out);
  for (const std::string& skipped : s.skipped) std::cerr << "skipped " << skipped << ": it has not stopped\n";
  if (!s.ancestors.empty()) {
    std::cerr << fmt::format("added {} ancestor run{}: {}\n", s.ancestors.size(), s.ancestors.size() == 1 ? "" : "s",
                             fmt::join(s.ancestors, ", "));
  }
  std::cout << fmt::format("wrote {}: {} run{}, {} checkpoint file{}, {} bytes\n", args.out, s.runs.size(),
                           s.runs.size() == 1 ? "" : "s", s.files, s.files == 1 ? "" : "s", grouped(s.bytes));
}

void run_import(const RunsArgs& args) {
  const std::string home = home_resolve(args.home);
  // A refused bundle imports nothing: into a home that did not exist, that means no folder.
  std::error_code ec;
  const bool existed = std::filesystem::exists(home, ec);
  runner::BundleSummary s;
  try {
    s = runner::bundle_import(args.bundle, home);
  } catch (...) {
    if (!existed) std::filesystem::remove_all(home, ec);
    throw;
  }
  const std::size_t added = s.runs.size() - s.unchanged.size();
  std::cout << fmt::format("imported {} run{} into {} ({} already there and identical), {} checkpoint file{}\n", added,
                           added == 1 ? "" : "s", home, s.unchanged.size(), s.files, s.files == 1 ? "" : "s");
}

}  // namespace

void add_runs_command(CLI::App& app) {
  auto args = std::make_shared<RunsArgs>();
  CLI::App* runs = app.add_subcommand("runs", "The run store: list, show and compare runs");
  runs->require_subcommand(1);
  CLI::App* list = runs->add_subcommand("list", "Every run, filtered and sorted");
  list->add_option("--experiment", args->filter.experiment, "only this experiment");
  list->add_option("--status", args->status, run_status_choices());
  list->add_option("--family", args->filter.family, "only this model family");
  list->add_option("--sort", args->filter.sort,
                   "id, name, family, status, started, tokens, flops, cumulative_flops, parameters, or any final "
                   "metric (val_loss, tokens_per_second, mfu, ...; runs without it last)");
  list->add_flag("--desc", args->filter.descending, "sort descending");
  CLI::App* show = runs->add_subcommand("show", "One run: config, lineage, budgets, final metrics, checkpoints");
  show->add_option("run", args->runs, "run id or name")->required()->expected(1);
  CLI::App* compare = runs->add_subcommand("compare", "Runs side by side");
  compare->add_option("runs", args->runs, "run ids or names")->required();
  CLI::App* remove =
      runs->add_subcommand("delete", "Delete runs' records (metrics, checkpoints, events) from the store");
  remove->add_option("runs", args->runs, "run ids or names")->required();
  remove->add_flag("--files", args->files, "also remove the run folders (only inside TFW_HOME)");
  add_home_option(remove, args->home);
  remove->callback([args] { run_delete(*args); });
  CLI::App* diff = runs->add_subcommand("diff", "The config keys that differ between two runs");
  diff->add_option("runs", args->runs, "two run ids or names")->required()->expected(2);
  compare->add_flag("--all-keys", args->all_keys, "show every config key, not only those that differ");
  CLI::App* out =
      runs->add_subcommand("export", "Write runs (records, configs, metrics, events, lineage) to a bundle file");
  out->add_option("runs", args->runs, "run ids or names (their ancestors come too)");
  out->add_option("--experiment", args->what.experiment, "every stopped run of this experiment");
  out->add_option("--out", args->out, "the bundle file to write")->required();
  out->add_flag("--checkpoints", args->what.checkpoints, "also the checkpoint files");
  add_home_option(out, args->home);
  out->callback([args] { run_export(*args); });
  CLI::App* in = runs->add_subcommand("import", "Read a bundle's runs into a home: all of them, or none");
  in->add_option("bundle", args->bundle, "the bundle file (tfw runs export)")->required();
  add_home_option(in, args->home);
  in->callback([args] { run_import(*args); });
  for (CLI::App* command : {list, show, compare, diff}) {
    add_home_option(command, args->home);
    command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  }
  list->callback([args] { run_list(*args); });
  show->callback([args] { run_show(*args); });
  compare->callback([args] { run_compare(*args); });
  diff->callback([args] { run_diff(*args); });
}

}  // namespace tfw::cli
