// See summary.h.
#include "workbench/results/summary.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "workbench/common/format.h"

namespace tfw::results {

std::string mean_text(const analysis::MeanInterval& m, const char* format) {
  const std::string mean = fmt::format(fmt::runtime(format), m.mean);
  if (!m.has_interval()) return fmt::format("{} (n = 1: no interval)", mean);
  return fmt::format("{} ± {} (95% CI, n = {})", mean, fmt::format(fmt::runtime(format), m.half_width), m.n);
}

Table groups_table(const ExperimentResults& results, const std::string& metric) {
  Table table{"groups",
              fmt::format("{}: {} over seeds (mean, 95% Student-t CI)", results.experiment().name, metric),
              {column("run (all seeds)", "variant"), column("family", "family"), column("seeds", "seeds"),
               column("finished", "finished"), column("parameters", "parameters"),
               column("cumulative FLOPs", "cumulative_flops"), column("final " + metric, "mean"),
               column("95% CI", "ci95_half_width"), column("sd", "sd"), column("min", "min"), column("max", "max")},
              {}};
  for (const Variant& v : results.variants()) {
    std::vector<double> values;
    std::set<std::int64_t> seeds;
    const RunRecord* any = nullptr;
    for (const RunResult* run : v.runs) {
      if (run->seed >= 0) seeds.insert(run->seed);
      if (!run->finished()) continue;
      const double value = results.final_value(*run, metric);
      if (std::isfinite(value)) values.push_back(value);
      any = &*run->record;
    }
    std::string seed_list;
    for (std::int64_t s : seeds) seed_list += (seed_list.empty() ? "" : " ") + std::to_string(s);
    std::vector<Cell> row = {text_cell(v.name),
                             text_cell(any ? any->family : "-"),
                             text_cell(seed_list.empty() ? "-" : seed_list),
                             count(static_cast<std::int64_t>(values.size())),
                             any ? count(any->parameters) : text_cell("-"),
                             any ? number(any->cumulative_flops, "{:.3e}") : text_cell("-")};
    if (values.empty()) {
      for (int i = 0; i < 5; ++i) row.push_back(text_cell("-"));
    } else {
      const analysis::MeanInterval m = analysis::mean_interval(values);
      double low = values[0], high = values[0];
      for (double x : values) low = std::min(low, x), high = std::max(high, x);
      row.push_back(number(m.mean));
      row.push_back(m.has_interval() ? Cell{fmt::format("± {:.4f}", m.half_width), fmt::format("{}", m.half_width)}
                                     : Cell{"n = 1: no interval", ""});
      row.push_back(number(m.sd));
      row.push_back(number(low));
      row.push_back(number(high));
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::vector<Table> groups_tables(const ExperimentResults& results) {
  std::vector<Table> tables = {groups_table(results)};
  for (const RunResult& run : results.runs()) {
    if (run.finished() && std::isfinite(results.final_value(run, "val/accuracy"))) {
      tables.push_back(groups_table(results, "val/accuracy"));
      tables.back().name = "groups_accuracy";
      break;
    }
  }
  return tables;
}

Table evaluations_table(const ExperimentResults& results) {
  Table table{
      "evaluations",
      fmt::format("{}: tfw eval of each run's last checkpoint, over seeds (mean, 95% Student-t CI)",
                  results.experiment().name),
      {column("run (all seeds)", "variant"), column("corpus", "corpus"), column("parameter blocks", "blocks"),
       column("metric", "metric"), column("runs", "runs"), column("mean", "mean"), column("95% CI", "ci95_half_width"),
       column("min", "min"), column("max", "max"), column("per seed", "per_seed")},
      {}};
  static const std::vector<std::string> kMetrics = {"loss", "bits_per_byte", "cloze_accuracy", "cloze_logprob"};
  for (const Variant& v : results.variants()) {
    // (corpus, blocks, metric) -> the last value of each finished run, with its seed.
    std::map<std::tuple<std::string, std::string, std::size_t>, std::vector<std::pair<std::int64_t, double>>> cells;
    for (const RunResult* run : v.runs) {
      if (!run->finished()) continue;
      std::map<std::tuple<std::string, std::string, std::size_t>, double> last;
      for (const EvaluationRow& e : results.store().evaluations(run->record->id)) {
        const auto metric = std::find(kMetrics.begin(), kMetrics.end(), e.metric);
        if (metric == kMetrics.end() || e.mode.rfind("stride", 0) == 0) continue;
        last[{e.corpus, e.blocks, static_cast<std::size_t>(metric - kMetrics.begin())}] = e.value;
      }
      for (const auto& [key, value] : last) cells[key].emplace_back(run->seed, value);
    }
    for (const auto& [key, values] : cells) {
      const auto& [corpus, blocks, metric] = key;
      std::vector<double> xs;
      std::string per_seed;
      for (const auto& [seed, x] : values) {
        if (std::isfinite(x)) xs.push_back(x);
        per_seed +=
            fmt::format("{}{}{:.4f}", per_seed.empty() ? "" : "; ", seed >= 0 ? fmt::format("s{}: ", seed) : "", x);
      }
      std::vector<Cell> row = {text_cell(v.name), text_cell(corpus), text_cell(blocks.empty() ? "all" : blocks),
                               text_cell(kMetrics[metric]), count(static_cast<std::int64_t>(xs.size()))};
      if (xs.empty()) {
        for (int i = 0; i < 4; ++i) row.push_back(text_cell("-"));
      } else {
        const analysis::MeanInterval m = analysis::mean_interval(xs);
        row.push_back(number(m.mean));
        row.push_back(m.has_interval() ? Cell{fmt::format("± {:.4f}", m.half_width), fmt::format("{}", m.half_width)}
                                       : Cell{"n = 1: no interval", ""});
        row.push_back(number(*std::min_element(xs.begin(), xs.end())));
        row.push_back(number(*std::max_element(xs.begin(), xs.end())));
      }
      row.push_back(text_cell(per_seed));
      table.rows.push_back(std::move(row));
    }
  }
  return table;
}

std::vector<ComparisonResult> compare_all(const ExperimentResults& results) {
  std::vector<ComparisonResult> out;
  for (const ComparisonSpec& spec : results.experiment().comparisons) out.push_back(compare(results, spec));
  return out;
}

Table comparisons_table(const std::string& experiment, const std::vector<ComparisonResult>& comparisons) {
  Table table{"comparisons",
              fmt::format("{}: named comparisons (paired by seed; a - b, or the ratio a / b for compute)", experiment),
              {column("comparison", "comparison"), column("a", "a"), column("b", "b"), column("quantity", "quantity"),
               column("pairs", "pairs"), column("a (mean)", "a_mean"), column("b (mean)", "b_mean"),
               column("a - b or a / b", "difference"), column("95% CI low", "ci95_low"),
               column("95% CI high", "ci95_high"), column("scale", "scale"), column("seeds with a < b", "seeds_a_less"),
               column("claimed", "claimed"), column("verdict", "verdict")},
              {}};
  for (const ComparisonResult& c : comparisons) {
    const bool log = c.log_scale;
    auto shown = [&](double x) {
      return log ? Cell{fmt::format("{:.3e}", std::pow(10.0, x)), fmt::format("{}", std::pow(10.0, x))} : number(x);
    };
    std::vector<Cell> row = {text_cell(c.spec.name), text_cell(c.spec.a), text_cell(c.spec.b), text_cell(c.quantity),
                             count(static_cast<std::int64_t>(c.seeds.size()))};
    if (c.difference) {
      const analysis::MeanInterval& d = c.difference->difference;
      row.push_back(shown(c.a_mean.mean));
      row.push_back(shown(c.b_mean.mean));
      row.push_back(log ? Cell{fmt::format("{:.3f}", std::pow(10.0, d.mean)), fmt::format("{}", d.mean)}
                        : Cell{fmt::format("{:+.4f}", d.mean), fmt::format("{}", d.mean)});
      for (double bound : {d.low, d.high}) {
        if (!d.has_interval()) {
          row.push_back(Cell{"n = 1: no interval", ""});
        } else {
          row.push_back(log ? Cell{fmt::format("{:.3f}", std::pow(10.0, bound)), fmt::format("{}", bound)}
                            : Cell{fmt::format("{:+.4f}", bound), fmt::format("{}", bound)});
        }
      }
      row.push_back(text_cell(log ? "ratio (CSV: log10 of it)" : "difference"));
    } else {
      for (int i = 0; i < 6; ++i) row.push_back(text_cell("-"));
    }
    std::size_t a_less = 0;  // an unreached target counts as infinite compute
    for (std::size_t i = 0; i < c.a.size(); ++i) a_less += c.a[i] < c.b[i];
    // Read as "2/3"; in CSV the count alone (its denominator is the pairs column).
    row.push_back(Cell{fmt::format("{}/{}", a_less, c.seeds.size()), std::to_string(a_less)});
    row.push_back(text_cell(c.spec.expect));
    row.push_back(text_cell(c.verdict));
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table comparison_seeds_table(const std::string& experiment, const std::vector<ComparisonResult>& comparisons) {
  Table table{
      "comparison_seeds",
      fmt::format("{}: each comparison's pairs, one row per seed (the quantity on each side, and a - b)", experiment),
      {column("comparison", "comparison"), column("seed", "seed"), column("a", "a"), column("b", "b"),
       column("a - b", "difference")},
      {}};
  for (const ComparisonResult& c : comparisons) {
    for (std::size_t i = 0; i < c.seeds.size() && i < c.a.size() && i < c.b.size(); ++i) {
      // Compute is compared on log10 FLOPs; the sides are shown as FLOPs, the difference as
      // the ratio's log10 (as in the comparisons table). An unreached target is infinite: empty.
      const bool log = c.log_scale;
      auto side = [&](double x) {
        if (!std::isfinite(x)) return Cell{"not reached", ""};
        return log ? Cell{fmt::format("{:.3e}", x), fmt::format("{}", x)}
                   : Cell{fmt::format("{:.4f}", x), fmt::format("{}", x)};
      };
      const double d = log ? std::log10(c.a[i]) - std::log10(c.b[i]) : c.a[i] - c.b[i];
      table.rows.push_back({text_cell(c.spec.name), count(c.seeds[i]), side(c.a[i]), side(c.b[i]),
                            std::isfinite(d) ? Cell{fmt::format("{:+.4f}", d), fmt::format("{}", d)} : Cell{"-", ""}});
    }
  }
  return table;
}

RunTables run_tables(const ExperimentResults& set, const std::string& paper_path) {
  const std::string& name = set.experiment().name;
  toml::table paper;
  if (std::filesystem::exists(paper_path)) paper = toml::parse_file(paper_path);
  Table results{"results",
                fmt::format("{}: results (measured here; paper numbers at the paper's scale)", name),
                {column("run", "run"),
                 column("family", "family"),
                 column("grown from", "parent"),
                 column("growth", "growth_method"),
                 column("parameters", "parameters"),
                 column("tokens", "tokens"),
                 column("val loss", "val_loss"),
                 column("val ppl", "val_perplexity"),
                 column("val accuracy (%)", "val_accuracy_percent"),
                 {"token-token FLOPs (10^4 T^2)", "token-token FLOPs ($10^4\\,T^2$)", "token_token_flops_per_1e4_t2"},
                 column("status", "status"),
                 column("paper value", "paper_value"),
                 column("paper metric", "paper_metric"),
                 column("paper source", "paper_source"),
                 column("paper scale", "paper_scale")},
                {}};
  Table ledger{"ledger",
               fmt::format("{}: cost ledger", name),
               {column("run", "run"), column("parameters", "parameters"), column("tokens", "tokens"),
                column("stage FLOPs", "stage_flops"), column("cumulative FLOPs", "cumulative_flops"),
                column("wall time (s)", "wall_seconds"), column("other CPU share", "other_cpu_share"),
                column("contended", "contended"), column("machine", "host")},
               {}};
  const Cell none{"-", ""};
  for (const RunResult& run : set.runs()) {
    const std::string& run_name = run.name;
    const std::string paper_key = run.planned ? run.planned->paper : "";
    if (!run.record) {
      std::vector<Cell> row(results.columns.size(), none);
      row[0] = text_cell(run_name);
      row[10] = text_cell("not run");
      results.rows.push_back(row);
      continue;
    }
    const RunRecord& r = *run.record;
    const double val = r.final_metrics.number_or_nan("val_loss");
    std::vector<Cell> paper_cells(4, none);
    if (!paper_key.empty()) {
      const toml::node* entry = toml::at_path(paper, paper_key).node();
      if (entry == nullptr || !entry->is_table()) {
        throw UsageError(fmt::format("run {}: paper result '{}' is not in {}", run_name, paper_key, paper_path));
      }
      const toml::table& p = *entry->as_table();
      paper_cells = {number(p["value"].value_or(std::nan("")), "{}"), text_cell(p["metric"].value_or(std::string("-"))),
                     text_cell(p["source"].value_or(std::string("-"))),
                     text_cell(p["scale"].value_or(std::string("-")))};
    }
    Cell parent = none;
    if (r.parent != 0) {
      const std::optional<RunRecord> p = set.store().run_get(r.parent);
      parent = text_cell(p ? p->name : std::to_string(r.parent));
    }
    // Paper Table 8's unit: the token-token term per sequence over 10^4·T² = 4·L·d_attn / 10^4.
    Cell token_token = none;
    try {
      ModelConfig model = model_config_parse(registry(), toml::parse(r.config, r.name), r.name);
      token_token = number(static_cast<double>(model.spec->flops_per_token(1).token_token) / 1e4);
    } catch (const std::exception&) {
      // a config this build cannot parse (another plugin set): leave the cell empty
    }
    // An image classifier's accuracy (its last val/accuracy); a language model has none, and
    // the perplexity of a classifier's loss means nothing, so each shows "-" for the other.
    const std::vector<MetricPoint> accuracy = set.store().metrics(r.id, "val/accuracy");
    const bool classifier = !accuracy.empty();
    std::vector<Cell> row = {text_cell(r.name),
                             text_cell(r.family),
                             parent,
                             r.growth_method.empty() ? none : text_cell(r.growth_method),
                             count(r.parameters),
                             count(r.tokens),
                             number(val),
                             classifier ? none : number(std::exp(val), "{:.2f}"),
                             classifier ? number(100 * accuracy.back().value, "{:.2f}") : none,
                             token_token,
                             text_cell(status_name(r.status))};
    row.insert(row.end(), paper_cells.begin(), paper_cells.end());
    results.rows.push_back(row);
    const double wall = r.ended > r.started ? r.ended - r.started : 0;
    ledger.rows.push_back(
        {text_cell(r.name), count(r.parameters), count(r.tokens), number(r.flops, "{:.3e}"),
         number(r.cumulative_flops, "{:.3e}"), number(wall, "{:.0f}"),
         number(r.final_metrics.number_or_nan("other_cpu_share"), "{:.2f}"),
         text_cell(r.final_metrics.number("other_cpu_share") ? (r.final_metrics.flag("contended") ? "yes" : "no")
                                                             : "-"),
         text_cell(r.host)});
  }
  return {results, ledger};
}

}  // namespace tfw::results
