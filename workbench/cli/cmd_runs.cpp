// `tfw runs list|show|compare|diff`: the run store, read-only; `tfw runs delete`: remove records;
// `tfw runs export|import`: run bundles (runner/bundle.h).
#include <cmath>
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "engine/config_diff.h"
#include "engine/error.h"
#include "engine/home.h"
#include "runner/bundle.h"
#include "storage/store.h"
#include "workbench/results/results.h"
#include "workbench/results/summary.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/common/records_json.h"

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
  bool all_keys = false;       // compare: every config key, not only those that differ
  std::string out;             // export: the bundle file
  std::string bundle;          // import: the bundle file
  runner::BundleExport what;   // export: --experiment, --checkpoints
};

std::string metric(const RunRecord& r, const char* key) {
  nlohmann::json metrics = json_or_empty(r.final_metrics);
  if (!metrics.contains(key) || !metrics[key].is_number()) return "-";
  return fmt::format("{:.4f}", metrics[key].get<double>());
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
      std::cerr << fmt::format("note: '{}' names {} runs; this is the newest, id {} (experiment {}). Others: {}. "
                               "Pass an id to choose.\n", run, others.size() + 1, record->id, record->experiment,
                               fmt::join(others, ", "));
    }
  }
  return *record;
}

void run_list(const RunsArgs& args) {
  RunFilter filter = args.filter;
  if (!args.status.empty()) {
    filter.status = run_status_parse(args.status);
    if (!filter.status) {
      throw UsageError(with_hint(fmt::format("--status '{}' is not a run status", args.status),
                                 "choose " + run_status_choices()));
    }
  }
  auto store = open_store(home_resolve(args.home));
  std::vector<RunRecord> runs = store->runs(filter);
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const RunRecord& r : runs) list.push_back(run_json(r));
    print_json({{"runs", list}});
    return;
  }
  std::cout << fmt::format("{:>4}  {:<12} {:<28} {:<12} {:<9} {:>10} {:>12} {:>11} {:>11} {:>9}  {}\n", "id",
                           "experiment", "name", "family", "status", "params", "tokens", "FLOPs", "cum. FLOPs",
                           "val loss", "started");
  for (const RunRecord& r : runs) {
    std::cout << fmt::format("{:>4}  {:<12} {:<28} {:<12} {:<9} {:>10} {:>12} {:>11.3e} {:>11.3e} {:>9}  {}\n", r.id,
                             r.experiment, r.name, r.family, status_name(r.status), short_count(r.parameters), grouped(r.tokens),
                             r.flops, r.cumulative_flops, metric(r, "val_loss"), local_time(r.started));
  }
  if (runs.empty()) std::cout << "(no runs)\n";
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
      chain.push_back({{"id", ancestor.id}, {"name", ancestor.name}, {"flops", ancestor.flops},
                       {"cumulative_flops", ancestor.cumulative_flops}, {"growth_method", ancestor.growth_method}});
    }
    json["lineage"] = chain;
    nlohmann::json saved = nlohmann::json::array();
    for (const CheckpointRow& c : checkpoints) {
      saved.push_back({{"step", c.step}, {"path", c.path}, {"checksum", c.checksum}, {"bytes", c.bytes}});
    }
    json["checkpoints"] = saved;
    json["metric_points"] = store->metrics_count(r.id);
    json["events"] = events.size();
    nlohmann::json evaluated = nlohmann::json::array();
    for (const EvaluationRow& e : evaluations) {
      evaluated.push_back({{"step", e.step}, {"corpus", e.corpus}, {"metric", e.metric},
                           {"value", std::isfinite(e.value) ? nlohmann::json(e.value) : nlohmann::json(nullptr)},
                           {"windows", e.windows}, {"tokens", e.tokens}, {"mode", e.mode}, {"blocks", e.blocks},
                           {"checkpoint", e.checkpoint}, {"created", e.created}});
    }
    json["evaluations"] = evaluated;
    print_json(json);
    return;
  }
  std::cout << fmt::format("run {} '{}' ({}), experiment '{}': {}\n", r.id, r.name, r.family, r.experiment,
                           status_name(r.status));
  std::cout << fmt::format("  started {}  ended {}  host {}  git {}  seed {}\n", local_time(r.started), local_time(r.ended), r.host,
                           r.git_commit, r.seed);
  std::cout << fmt::format("  parameters {}  tokens {}  own FLOPs {:.3e}  cumulative FLOPs {:.3e}\n",
                           grouped(r.parameters), grouped(r.tokens), r.flops, r.cumulative_flops);
  std::cout << fmt::format("  final metrics {}\n", r.final_metrics);
  if (!r.error.empty()) std::cout << "  error: " << r.error << "\n";
  std::cout << "  lineage:";
  for (const RunRecord& ancestor : lineage) {
    std::cout << fmt::format(" {} {}({:.3e} FLOPs{})", ancestor.id == lineage.front().id ? "" : "->", ancestor.name,
                             ancestor.flops, ancestor.growth_method.empty() ? "" : ", " + ancestor.growth_method);
  }
  std::cout << "\n  checkpoints:\n";
  for (const CheckpointRow& c : checkpoints) {
    std::cout << fmt::format("    step {:>8}  {}  {}  {}\n", c.step, grouped(c.bytes), c.checksum, c.path);
  }
  if (!evaluations.empty()) {
    std::cout << "  evaluations (tfw eval):\n";
    for (const EvaluationRow& e : evaluations) {
      if (e.metric != "loss" && e.metric != "bits_per_byte" && e.metric.rfind("cloze", 0) != 0) continue;
      std::cout << fmt::format("    step {:>8}  {:<16} {:<10} {:<14} {:.4f}  ({} windows, {} tokens{})\n", e.step, e.corpus,
                               e.mode, e.metric, e.value, e.windows, grouped(e.tokens),
                               e.blocks.empty() ? "" : "; parameter blocks " + e.blocks);
    }
  }
  std::cout << fmt::format("  {} metric points, {} events; run folder {}\n", store->metrics_count(r.id), events.size(),
                           r.run_dir);
  std::cout << "  config:\n";
  std::istringstream config(r.config);
  for (std::string line; std::getline(config, line);) std::cout << "    " << line << "\n";
}

// Final validation losses of a group's runs.
std::vector<double> group_losses(const results::SeedGroup& g) {
  std::vector<double> values;
  for (const RunRecord* r : g.runs) {
    const nlohmann::json m = nlohmann::json::parse(r->final_metrics, nullptr, false);
    if (m.is_object() && m.contains("val_loss") && m["val_loss"].is_number()) values.push_back(m["val_loss"].get<double>());
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
      entry["val_loss_ci95"] = m.has_interval() ? nlohmann::json({m.low, m.high}) : nlohmann::json(nullptr);  // n = 1: none
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
  auto row = [&](const char* label, auto&& cell) {
    std::cout << fmt::format("{:<18}", label);
    for (const RunRecord& r : runs) std::cout << fmt::format(" {:>20}", cell(r));
    std::cout << "\n";
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
  row("tokens/s", [](const RunRecord& r) { return metric(r, "tokens_per_second"); });
  row("host", [](const RunRecord& r) { return r.host; });
  // Config keys: those that differ between the runs (every key with --all-keys).
  std::vector<std::map<std::string, std::string>> configs;
  std::set<std::string> keys;
  for (const RunRecord& r : runs) {
    configs.push_back(config_flatten(r.config, fmt::format("run {}'s config", r.id)));
    for (const auto& [key, value] : configs.back()) keys.insert(key);
  }
  std::size_t shown = 0;
  for (const std::string& key : keys) {
    std::set<std::string> values;
    for (const auto& c : configs) values.insert(c.count(key) ? c.at(key) : "-");
    if (values.size() < 2 && !args.all_keys) continue;
    if (shown++ == 0) std::cout << (args.all_keys ? "config:\n" : "config keys that differ (--all-keys: every key):\n");
    std::cout << fmt::format("{:<{}}", "  " + key, std::max<std::size_t>(18, key.size() + 2));
    for (const auto& c : configs) std::cout << fmt::format(" {:>20}", c.count(key) ? c.at(key) : "-");
    std::cout << "\n";
  }
  if (shown == 0) std::cout << "config: the same for every run\n";
  if (groups.size() == runs.size()) return;  // no two runs differ only in seed
  std::cout << "\ngroups that differ only in seed (final val loss, mean and 95% Student-t CI):\n";
  for (const results::SeedGroup& g : groups) {
    const std::vector<double> values = group_losses(g);
    std::string ids;
    for (const RunRecord* r : g.runs) ids += (ids.empty() ? "" : ",") + std::to_string(r->id);
    std::cout << fmt::format("  {:<28} runs {:<12} {}\n", g.label, ids,
                             values.empty() ? std::string("no val loss") : results::mean_text(analysis::mean_interval(values)));
  }
}

// Deletes runs' records (metrics, checkpoints, events) and, with --files, their folders when
// they lie inside TFW_HOME. Refuses a running run and a run that others were grown from.
void run_delete(const RunsArgs& args) {
  auto store = Store::open(home_resolve(args.home) + "/runs.db");
  std::vector<RunRecord> doomed;
  for (const std::string& run : args.runs) doomed.push_back(find(*store, run));
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
      list.push_back({{"key", d.key}, {"a", d.a.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.a)},
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
  list->add_option("--sort", args->filter.sort, "id, name, family, status, started, tokens, flops, cumulative_flops, parameters");
  list->add_flag("--desc", args->filter.descending, "sort descending");
  CLI::App* show = runs->add_subcommand("show", "One run: config, lineage, budgets, final metrics, checkpoints");
  show->add_option("run", args->runs, "run id or name")->required()->expected(1);
  CLI::App* compare = runs->add_subcommand("compare", "Runs side by side");
  compare->add_option("runs", args->runs, "run ids or names")->required();
  CLI::App* remove = runs->add_subcommand("delete", "Delete runs' records (metrics, checkpoints, events) from the store");
  remove->add_option("runs", args->runs, "run ids or names")->required();
  remove->add_flag("--files", args->files, "also remove the run folders (only inside TFW_HOME)");
  remove->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
  remove->callback([args] { run_delete(*args); });
  CLI::App* diff = runs->add_subcommand("diff", "The config keys that differ between two runs");
  diff->add_option("runs", args->runs, "two run ids or names")->required()->expected(2);
  compare->add_flag("--all-keys", args->all_keys, "show every config key, not only those that differ");
  CLI::App* out = runs->add_subcommand("export", "Write runs (records, configs, metrics, events, lineage) to a bundle file");
  out->add_option("runs", args->runs, "run ids or names (their ancestors come too)");
  out->add_option("--experiment", args->what.experiment, "every stopped run of this experiment");
  out->add_option("--out", args->out, "the bundle file to write")->required();
  out->add_flag("--checkpoints", args->what.checkpoints, "also the checkpoint files");
  out->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
  out->callback([args] { run_export(*args); });
  CLI::App* in = runs->add_subcommand("import", "Read a bundle's runs into a home: all of them, or none");
  in->add_option("bundle", args->bundle, "the bundle file (tfw runs export)")->required();
  in->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
  in->callback([args] { run_import(*args); });
  for (CLI::App* command : {list, show, compare, diff}) {
    command->add_option("--home", args->home, "TFW_HOME (default: $TFW_HOME or ./tfw-home)");
    command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  }
  list->callback([args] { run_list(*args); });
  show->callback([args] { run_show(*args); });
  compare->callback([args] { run_compare(*args); });
  diff->callback([args] { run_diff(*args); });
}

}  // namespace tfw::cli
