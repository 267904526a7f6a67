// See report.h.
#include "workbench/results/report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/config/run_config.h"
#include "workbench/common/format.h"
#include "workbench/results/figures.h"
#include "workbench/results/pace.h"
#include "workbench/results/summary.h"

namespace tfw::results {

namespace {

namespace fs = std::filesystem;

std::string today() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::gmtime(&now));
  return text;
}

std::string seconds_text(double seconds) {
  const long s = std::lround(seconds);
  if (s >= 3600) return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} s", s);
}

std::string value_text(double x, bool log) {
  return log ? fmt::format("{:.3e} FLOPs", std::pow(10.0, x)) : fmt::format("{:.4f}", x);
}

// What was measured: runs, seeds, scale, compute, wall time, machines.
std::string measured_section(const ExperimentResults& results) {
  std::size_t planned = results.runs().size(), finished = 0;
  double flops = 0, wall = 0, most_other = 0;
  std::int64_t low = 0, high = 0, tokens = 0;
  std::set<std::string> hosts;
  std::set<std::int64_t> seeds;
  std::size_t contended = 0;
  for (const RunResult& r : results.runs()) {
    if (!r.finished()) continue;
    finished += 1;
    const RunRecord& rec = *r.record;
    flops += rec.flops;
    tokens += rec.tokens;
    wall += rec.ended > rec.started ? rec.ended - rec.started : 0;
    low = low == 0 ? rec.parameters : std::min(low, rec.parameters);
    high = std::max(high, rec.parameters);
    hosts.insert(rec.host);
    if (r.seed >= 0) seeds.insert(r.seed);
    if (rec.final_metrics.flag("contended")) contended += 1;
    if (const std::optional<double> other = rec.final_metrics.number("other_cpu_share")) {
      most_other = std::max(most_other, *other);
    }
  }
  // How many runs ran at once, at most (`tfw run --jobs N`): their [started, ended] spans.
  std::vector<std::pair<double, int>> edges;
  for (const RunResult& r : results.runs()) {
    if (!r.finished() || r.record->ended <= r.record->started) continue;
    edges.emplace_back(r.record->started, 1);
    edges.emplace_back(r.record->ended, -1);
  }
  std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
  int running = 0, at_most = 1;
  for (const auto& [when, change] : edges) at_most = std::max(at_most, running += change);
  auto join = [](const auto& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + fmt::format("{}", item);
    return out;
  };
  std::ostringstream out;
  out << "## What was measured\n\n";
  out << fmt::format("- **Runs:** {} finished of {} planned, in {} groups that differ only in seed.\n", finished,
                     planned, results.variants().size());
  out << fmt::format("- **Seeds:** {}.\n", seeds.empty() ? std::string("none (one run per group)") : join(seeds));
  out << fmt::format("- **Scale:** {} to {} parameters; {} training tokens in all; data {}.\n", grouped(low),
                     grouped(high), grouped(tokens), join(results.corpora()));
  out << fmt::format("- **Compute:** {:.3e} training FLOPs in all (each run's own, so a lineage counts once).\n",
                     flops);
  out << fmt::format("- **Wall time:** {} summed over the runs, which ran {} on {}.\n", seconds_text(wall),
                     at_most == 1 ? std::string("one at a time") : fmt::format("up to {} at a time", at_most),
                     join(hosts));
  out << fmt::format(
      "- **Contention:** {} of {} runs shared the CPU with other work for more than a quarter of their "
      "time (the largest share of other work: {:.0f}%). Loss values do not depend on it; wall times do.\n",
      contended, finished, 100 * most_other);
  out << "\n";
  return out.str();
}

// The setup of each group, from its first finished run's resolved config: model, data,
// tokens, batch, learning-rate schedule, optimiser and growth; then the experiment file.
std::string setup_section(const ExperimentResults& results) {
  std::vector<std::vector<Cell>> rows;
  auto text = [](const toml::node_view<const toml::node>& node) -> std::string {
    if (const auto* d = node.as_floating_point()) return float_text(d->get());
    if (const auto* i = node.as_integer()) return std::to_string(i->get());
    if (const auto* s = node.as_string()) return s->get();
    if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
    return "";
  };
  for (const Variant& v : results.variants()) {
    const std::vector<const RunResult*> finished = v.finished();
    if (finished.empty()) continue;
    const RunRecord& r = *finished.front()->record;
    toml::table config;
    try {
      config = toml::parse(r.config);
    } catch (const toml::parse_error&) {
      continue;
    }
    const toml::node_view<const toml::node> model = std::as_const(config)["model"],
                                            train = std::as_const(config)["train"],
                                            data = std::as_const(config)["data"];
    std::string shape;
    for (const char* key : {"layers", "d", "heads", "n_attn", "n_ffn", "d_ffn", "patch", "image_size"}) {
      const std::string value = text(model[key]);
      if (!value.empty()) shape += (shape.empty() ? "" : ", ") + fmt::format("{} {}", key, value);
    }
    std::string corpus = text(data["corpus"]);
    if (corpus.empty()) corpus = text(data["dataset"]);
    const std::string seq = text(train["seq_len"]) == "0" || text(train["seq_len"]).empty() ? text(model["seq_len"])
                                                                                            : text(train["seq_len"]);
    std::string batch =
        seq.empty() ? text(train["batch_size"]) : fmt::format("{} × {}", text(train["batch_size"]), seq);
    // A step's batch: micro-batches given by hand multiply it; "auto" split it to fit.
    const std::string accum = text(train["grad_accum"]);
    if (accum == "auto") {
      batch += " (in micro-batches that fit)";
    } else if (!accum.empty() && accum != "1") {
      batch = fmt::format("{} × {} micro-batches", batch, accum);
    }
    std::string schedule = fmt::format("{}, {} warm-up steps, cosine to {}×", text(train["lr"]),
                                       text(train["warmup_steps"]), text(train["min_lr_ratio"]));
    if (text(train["min_lr_ratio"]) == "1.0")
      schedule = fmt::format("{} constant, {} warm-up steps", text(train["lr"]), text(train["warmup_steps"]));
    const std::string optimiser =
        fmt::format("AdamW β {}, {}; decay {}; clip {}", text(train["beta1"]), text(train["beta2"]),
                    text(train["weight_decay"]), text(train["grad_clip"]));
    std::string growth = "-";
    if (!r.growth_method.empty()) {
      growth = r.growth_method;
      try {  // the options as the store keeps them: TOML (key_init = 'zero')
        const toml::table options = toml::parse(r.growth_options);
        std::string listed;
        for (const auto& [key, value] : options) {
          listed += (listed.empty() ? "" : ", ") + std::string(key.str()) + " = " +
                    text(toml::node_view<const toml::node>(&value));
        }
        if (!listed.empty()) growth += " (" + listed + ")";
      } catch (const toml::parse_error&) {}
    }
    rows.push_back({text_cell(v.name), text_cell(r.family), count(r.parameters), text_cell(shape), text_cell(corpus),
                    count(r.tokens), text_cell(batch), text_cell(schedule), text_cell(optimiser), text_cell(growth)});
  }
  std::ostringstream out;
  out << "## Setup\n\n";
  if (!rows.empty()) {
    Table table{"setup",
                "",
                {column("group", "group"), column("family", "family"), column("parameters", "parameters"),
                 column("model", "model"), column("data", "data"), column("tokens per run", "tokens"),
                 column("batch × length", "batch"), column("learning rate", "lr"), column("optimiser", "optimiser"),
                 column("grown by", "growth")},
                std::move(rows)};
    std::string md = render_md({table});
    md = md.substr(md.find('\n') + 2);  // the table without its (empty) heading
    out << "Each group's model and training, from its first finished run's resolved config (the seeds differ only in "
           "`train.seed`):\n\n"
        << md;
  }
  const std::string& path = results.experiment().path;
  std::ifstream file(path);
  if (!path.empty() && file) {
    std::ostringstream body;
    body << file.rdbuf();
    out << fmt::format("The experiment file, `{}`:\n\n```toml\n{}{}```\n\n", fs::path(path).filename().string(),
                       body.str(), body.str().empty() || body.str().back() == '\n' ? "" : "\n");
  }
  return out.str();
}

// What produced a run's numbers, one line per start of it (a resume adds one): its
// "provenance" events; empty for runs recorded before them.
std::set<std::string> run_provenance(Store& store, const RunRecord& run) {
  std::set<std::string> out;
  for (const EventRow& e : store.events(run.id)) {
    if (e.kind != "provenance") continue;
    const nlohmann::json p = nlohmann::json::parse(e.payload, nullptr, false);
    if (!p.is_object()) continue;
    auto field = [&](const char* key) {
      if (!p.contains(key)) return std::string("?");
      return p[key].is_string() ? p[key].get<std::string>() : p[key].dump();
    };
    std::string device = field("device");
    // ATen's CPU kernels (AVX512, AVX2), absent from older records; they round differently.
    const std::string kernels = p.contains("cpu_capability") ? ", ATen " + field("cpu_capability") + " kernels" : "";
    out.insert(fmt::format("commit {}, LibTorch {}{}, {}{}{}, {} thread{}, {}", field("git_commit"), field("libtorch"),
                           field("cuda").empty() ? "" : " (CUDA " + field("cuda") + ")", field("processor"),
                           device == "cpu" ? "" : " (" + device + ")", kernels, field("threads"),
                           field("threads") == "1" ? "" : "s", field("precision")));
  }
  return out;
}

// A run and its ancestors: a grown run's numbers depend on every stage before it.
std::set<std::string> lineage_provenance(Store& store, const RunRecord& run) {
  std::set<std::string> out;
  for (const RunRecord& r : store.lineage(run.id)) {
    const std::set<std::string> own = run_provenance(store, r);
    if (own.empty()) out.insert("not recorded (a run from before tfw recorded provenance)");
    out.insert(own.begin(), own.end());
  }
  return out;
}

// An experiment built up in units ([units], `tfw run FILE --unit NAME`): which have run, and
// which are still to run with the GPU time they need at the tokens/s its finished runs measured.
std::string units_section(const ExperimentResults& results) {
  const Experiment& e = results.experiment();
  if (e.units.empty()) return "";
  GpuPaces paces;
  for (const RunResult& r : results.runs()) {
    if (r.finished()) paces.add(*r.record);
  }
  std::vector<std::string> done, left;
  double left_seconds = 0;
  std::size_t unestimated = 0;
  std::ostringstream rows;
  for (const ExperimentUnit& unit : e.units) {
    std::size_t finished = 0;
    double wall = 0, needed = 0;
    for (const std::string& name : unit.runs) {
      const RunResult* run = results.run(name);
      if (run != nullptr && run->finished()) {
        finished += 1;
        wall += std::max(0.0, run->record->ended - run->record->started);
      } else if (run != nullptr && run->planned != nullptr) {
        const ExperimentRun& p = *run->planned;
        needed += paces.seconds(run_config_to_toml(p.config),
                                static_cast<double>(p.plan.total_steps * p.plan.tokens_per_step));
      }
    }
    const bool complete = finished == unit.runs.size();
    (complete ? done : left).push_back(unit.name);
    if (!complete && std::isfinite(needed)) left_seconds += needed;
    if (!complete && !std::isfinite(needed)) unestimated += 1;
    rows << fmt::format("| {} | {} | {} of {} | {} | {} |\n", unit.name, unit.pattern, finished, unit.runs.size(),
                        finished > 0 ? duration_text(wall) : "-",
                        complete                ? std::string("-")
                        : std::isfinite(needed) ? duration_text(needed)
                                                : std::string("not measured yet"));
  }
  std::ostringstream out;
  out << "## Units\n\n";
  out << fmt::format(
      "The experiment runs in {} units, each one command (`tfw run {} --unit NAME`) that trains its runs and the "
      "ancestors they need. **Measured:** {} of {}{}. **Still to run:** {}{}.\n\n",
      e.units.size(), e.path, done.size(), e.units.size(),
      done.empty() ? "" : fmt::format(" ({})", fmt::join(done, ", ")),
      left.empty() ? std::string("none") : fmt::format("{} ({})", left.size(), fmt::join(left, ", ")),
      left.empty() ? ""
      : unestimated == left.size()
          ? "; no finished run has measured their models' pace yet, so their GPU time is not estimated"
          : fmt::format("; about {} of GPU time for {} of them, at the tokens/s that finished runs of the same "
                        "models measured{}",
                        duration_text(left_seconds), left.size() - unestimated,
                        unestimated > 0 ? fmt::format(" ({} not measured yet)", unestimated) : std::string()));
  out << "| unit | runs (pattern) | finished | wall time so far | time still needed |\n|---|---|---|---|---|\n"
      << rows.str() << "\n";
  return out.str();
}

// What produced the numbers, and a warning wherever runs that are averaged or compared
// were produced differently (another commit, LibTorch, processor, thread count or precision).
std::string provenance_section(const ExperimentResults& results, const std::vector<ComparisonResult>& comparisons) {
  std::map<std::string, std::set<std::string>> of_variant;
  std::map<std::string, std::size_t> counts;  // provenance line -> finished runs
  for (const Variant& v : results.variants()) {
    for (const RunResult* r : v.finished()) {
      const std::set<std::string> p = lineage_provenance(results.store(), *r->record);
      of_variant[v.name].insert(p.begin(), p.end());
      for (const std::string& line : run_provenance(results.store(), *r->record)) counts[line] += 1;
    }
  }
  std::ostringstream out;
  out << "## Provenance\n\n";
  if (counts.empty()) {
    out << "The runs do not record what produced them (they were recorded before tfw did). Their numbers cannot be "
           "traced to a commit, a LibTorch or a processor.\n\n";
    return out.str();
  }
  out << "What produced the numbers (each start of a run, a resume included, records one):\n\n";
  for (const auto& [line, n] : counts) out << fmt::format("- {} ({} run{})\n", line, n, n == 1 ? "" : "s");
  std::vector<std::string> warnings;
  for (const auto& [variant, lines] : of_variant) {
    if (lines.size() > 1) {
      warnings.push_back(fmt::format("the runs of group `{}` (or their ancestors) were produced differently: {}",
                                     variant, fmt::join(lines, "; ")));
    }
  }
  for (const ComparisonResult& c : comparisons) {
    const auto a = of_variant.find(c.spec.a), b = of_variant.find(c.spec.b);
    if (a == of_variant.end() || b == of_variant.end()) continue;
    std::set<std::string> both = a->second;
    both.insert(b->second.begin(), b->second.end());
    if (both.size() > 1 && a->second.size() == 1 && b->second.size() == 1) {
      warnings.push_back(
          fmt::format("comparison `{}` sets runs produced differently against each other: a by {}; b by {}",
                      c.spec.name, *a->second.begin(), *b->second.begin()));
    }
  }
  out << "\n";
  if (warnings.empty()) {
    out << "Every group and every comparison was produced alike.\n\n";
  } else {
    for (const std::string& w : warnings) out << "- **Warning:** " << w << ".\n";
    out << "\n";
  }
  return out.str();
}

}  // namespace

std::vector<ClaimLine> report_write(const ExperimentResults& results, const ReportOptions& options,
                                    std::vector<std::string>& written) {
  const Experiment& e = results.experiment();
  const std::string file = e.name + ".md";
  const std::string figure_dir = "figures/" + e.name;
  std::vector<ClaimLine> claims;
  const std::vector<ComparisonResult> comparisons = compare_all(results);

  std::ostringstream out;
  out << "# " << e.name << (e.description.empty() ? "" : ": " + e.description) << "\n\n";
  out << fmt::format("Generated on {} by `{}` ({}) from {}. Regenerate it with the same command.\n\n", today(),
                     options.command, options.tool_version, options.source);
  const bool any_finished =
      std::any_of(results.runs().begin(), results.runs().end(), [](const RunResult& r) { return r.finished(); });
  if (any_finished) {
    out << measured_section(results);
  } else {
    out << fmt::format(
        "**No run of this experiment has finished yet**: its data does not ship yet, and every claim below is "
        "not yet decided. The plan: {} runs (`tfw run {} --dry-run`).\n\n",
        results.runs().size(), e.path);
  }
  out << units_section(results);
  out << setup_section(results);

  out << "## Verdict rule\n\n" << verdict_rule() << "\n\n";
  out << "## Claims\n\n";
  int number = 0;
  for (const ComparisonResult& c : comparisons) {
    if (c.spec.claim.empty()) continue;
    number += 1;
    out << fmt::format("### {}. {}\n\n", number, c.spec.claim);
    out << fmt::format("- **Paper:** {}.\n", c.spec.paper.empty() ? "-" : c.spec.paper);
    out << fmt::format("- **Measured:** {}; a = `{}`, b = `{}`, {} seed pair{} (comparison `{}`).\n", c.quantity,
                       c.spec.a, c.spec.b, c.seeds.size(), c.seeds.size() == 1 ? "" : "s", c.spec.name);
    if (c.difference) {
      out << fmt::format("- **a:** {}; **b:** {}{}.\n", mean_text(c.a_mean, "{:.4f}"), mean_text(c.b_mean, "{:.4f}"),
                         c.log_scale ? " (log10 FLOPs)" : "");
      const analysis::MeanInterval& d = c.difference->difference;
      if (c.log_scale) {
        out << fmt::format("- **Ratio a / b:** {:.3f}{}.\n", std::pow(10.0, d.mean),
                           d.has_interval()
                               ? fmt::format(", 95% CI [{:.3f}, {:.3f}]", std::pow(10.0, d.low), std::pow(10.0, d.high))
                               : std::string(" (n = 1: no interval)"));
      } else {
        out << fmt::format("- **Difference a - b:** {:+.4f}{}.\n", d.mean,
                           d.has_interval() ? fmt::format(", 95% CI [{:+.4f}, {:+.4f}]", d.low, d.high)
                                            : std::string(" (n = 1: no interval)"));
      }
    }
    std::size_t a_less = 0;
    for (std::size_t i = 0; i < c.a.size(); ++i) a_less += c.a[i] < c.b[i];
    std::string per_seed;
    for (std::size_t i = 0; i < c.seeds.size(); ++i) {
      per_seed += fmt::format("{}seed {}: {} against {}", per_seed.empty() ? "" : "; ", c.seeds[i],
                              std::isfinite(c.a[i]) ? value_text(c.log_scale ? std::log10(c.a[i]) : c.a[i], c.log_scale)
                                                    : std::string("not reached"),
                              std::isfinite(c.b[i]) ? value_text(c.log_scale ? std::log10(c.b[i]) : c.b[i], c.log_scale)
                                                    : std::string("not reached"));
    }
    if (!c.seeds.empty()) {
      out << fmt::format("- **Per seed (a against b):** {}. a < b in {} of {}.\n", per_seed, a_less, c.seeds.size());
    }
    out << fmt::format("- **Verdict: {}** ({}; claimed: {}).\n", c.verdict, c.verdict_reason, c.spec.expect);
    for (const std::string& note : c.notes) out << "- Note: " << note << ".\n";
    out << "\n";
    claims.push_back({e.name, c.spec.claim, c.spec.paper, c.verdict, file});
  }
  if (number == 0)
    out << "This experiment's file names no claims (`claim = \"...\"` in a `[comparisons.NAME]` table).\n\n";

  if (!any_finished) {  // nothing measured: no provenance, figures or tables to show
    const std::string path = (fs::path(options.out_dir) / file).string();
    const std::string text = out.str();
    file_write_durably(path, text.data(), text.size());
    written.push_back(path);
    return claims;
  }
  out << provenance_section(results, comparisons);

  // Figures.
  const std::vector<std::string> figures = figures_write(results, (fs::path(options.out_dir) / figure_dir).string());
  written.insert(written.end(), figures.begin(), figures.end());
  out << "## Figures\n\n";
  for (const Figure& f : figures_of(results)) {
    out << fmt::format("![{}]({}/{}.svg)\n\n*{}* (PNG: [{}/{}.png]({}/{}.png))\n\n", f.title, figure_dir, f.id,
                       f.caption, figure_dir, f.id, figure_dir, f.id);
  }

  // Tables.
  RunTables per_run = run_tables(results, options.paper_results);
  std::vector<Table> tables = groups_tables(results);
  if (Table evaluated = evaluations_table(results); !evaluated.rows.empty()) tables.push_back(std::move(evaluated));
  if (!comparisons.empty()) tables.push_back(comparisons_table(e.name, comparisons));
  tables.push_back(per_run.results);
  tables.push_back(per_run.ledger);
  out << "## Tables\n\nValidation loss is in nats per token (per byte for the byte tokenizer; per image for an image "
         "classifier, whose accuracy is the share of validation images classified right). The paper's numbers "
         "are at its own scale, and some are of another task (the last columns say which): compare trends, not "
         "values.\n\n";
  out << render_md(tables);

  const std::string path = (fs::path(options.out_dir) / file).string();
  const std::string text = out.str();
  file_write_durably(path, text.data(), text.size());
  written.push_back(path);
  return claims;
}

std::string report_index(const std::vector<ClaimLine>& claims, const ReportOptions& options) {
  std::ostringstream out;
  if (!options.preface.empty()) out << options.preface << "\n";
  out << "## Claims and verdicts\n\n";
  out << fmt::format("Generated on {} by `{}` ({}). The rule: {}\n\n", today(), options.command, options.tool_version,
                     verdict_rule());
  out << "| experiment | claim | paper | verdict |\n|---|---|---|---|\n";
  std::map<std::string, int> counts;
  for (const ClaimLine& c : claims) {
    out << fmt::format("| [{}]({}) | {} | {} | **{}** |\n", c.experiment, c.file, c.claim,
                       c.paper.empty() ? "-" : c.paper, c.verdict);
    counts[c.verdict] += 1;
  }
  out << fmt::format(
      "\n{} claims: {} supported, {} not supported, {} inconclusive{}.\n", claims.size(), counts["supported"],
      counts["not supported"], counts["inconclusive"],
      counts["not yet decided"] > 0 ? fmt::format(", {} not yet decided", counts["not yet decided"]) : std::string());
  return out.str();
}

}  // namespace tfw::results
