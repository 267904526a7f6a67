// See results.h.
#include "workbench/results/results.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/error.h"

namespace tfw::results {

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// "name-s12" -> ("name", 12); otherwise (name, -1).
std::pair<std::string, std::int64_t> split_seed(const std::string& name) {
  const std::size_t dash = name.rfind("-s");
  if (dash == std::string::npos || dash + 2 >= name.size()) return {name, -1};
  const std::string digits = name.substr(dash + 2);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 9) {
    return {name, -1};
  }
  return {name.substr(0, dash), std::stoll(digits)};
}

std::string corpus_of(const RunRecord& record) {
  try {
    const toml::table config = toml::parse(record.config);
    // A language model's corpus, an image classifier's dataset.
    return config["data"]["corpus"].value_or(config["data"]["dataset"].value_or(std::string()));
  } catch (const std::exception&) {
    return "";
  }
}

std::string short_number(double x) { return fmt::format("{:.4g}", x); }

}  // namespace

std::vector<const RunResult*> Variant::finished() const {
  std::vector<const RunResult*> out;
  for (const RunResult* run : runs) {
    if (run->finished()) out.push_back(run);
  }
  return out;
}

ExperimentResults::ExperimentResults(Store& store, Experiment experiment)
    : store_(store), experiment_(std::move(experiment)), from_file_(true) {
  for (const ExperimentRun& planned : experiment_.runs) {
    RunResult run;
    run.name = planned.name;
    run.variant = planned.variant.empty() ? planned.name : planned.variant;
    run.seed = planned.seed;
    run.planned = &planned;
    run.record = store_.run_in_experiment(experiment_.name, planned.name);
    runs_.push_back(std::move(run));
  }
  group();
}

ExperimentResults::ExperimentResults(Store& store, const std::string& experiment_name) : store_(store) {
  experiment_.name = experiment_name;
  RunFilter filter;
  filter.experiment = experiment_name;
  for (RunRecord& record : store_.runs(filter)) {
    RunResult run;
    run.name = record.name;
    std::tie(run.variant, run.seed) = split_seed(record.name);
    run.record = std::move(record);
    runs_.push_back(std::move(run));
  }
  group();
}

void ExperimentResults::group() {
  std::map<std::string, std::size_t> index;
  for (const RunResult& run : runs_) {
    auto [it, fresh] = index.emplace(run.variant, variants_.size());
    if (fresh) variants_.push_back(Variant{run.variant, {}});
    variants_[it->second].runs.push_back(&run);
  }
  for (Variant& v : variants_) {
    std::stable_sort(v.runs.begin(), v.runs.end(), [](const RunResult* x, const RunResult* y) { return x->seed < y->seed; });
  }
}

const Variant& ExperimentResults::variant(const std::string& name) const {
  for (const Variant& v : variants_) {
    if (v.name == name) return v;
  }
  throw UsageError(with_hint(fmt::format("'{}' is not a run of experiment {}", name, experiment_.name),
                             "name a run entry of the experiment file, without its seed suffix -sN"));
}

const RunResult* ExperimentResults::run(const std::string& name) const {
  for (const RunResult& r : runs_) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::set<std::string> ExperimentResults::corpora() const {
  std::set<std::string> out;
  for (const RunResult& r : runs_) {
    if (r.finished()) out.insert(corpus_of(*r.record));
  }
  return out;
}

std::vector<MetricPoint> ExperimentResults::points(const RunResult& run, const std::string& metric) const {
  if (!run.record) return {};
  auto key = std::make_pair(run.record->id, metric);
  auto found = cache_.find(key);
  if (found == cache_.end()) found = cache_.emplace(key, metric_points(store_, run.record->id, metric)).first;
  return found->second;
}

std::vector<MetricPoint> metric_points(Store& store, std::int64_t run, const std::string& metric) {
  // "eval/METRIC@CORPUS": the run's `tfw eval` results (oldest first), as points at their step.
  const std::size_t at = metric.rfind('@');
  if (metric.rfind("eval/", 0) != 0 || at == std::string::npos) return store.metrics(run, metric);
  const std::string name = metric.substr(5, at - 5), corpus = metric.substr(at + 1);
  std::vector<MetricPoint> points;
  for (const EvaluationRow& e : store.evaluations(run)) {
    if (e.metric == name && e.corpus == corpus) points.push_back({run, metric, e.step, 0, 0, 0, e.value});
  }
  return points;
}

double ExperimentResults::final_value(const RunResult& run, const std::string& metric) const {
  const std::vector<MetricPoint> own = points(run, metric);
  for (auto it = own.rbegin(); it != own.rend(); ++it) {
    if (std::isfinite(it->value)) return it->value;
  }
  return kNaN;
}

std::vector<analysis::CurvePoint> ExperimentResults::curve(const RunResult& run, const std::string& metric,
                                                          Axis axis) const {
  std::vector<analysis::CurvePoint> curve;
  if (!run.record) return curve;
  if (axis == Axis::OwnTokens) {
    for (const MetricPoint& p : points(run, metric)) curve.push_back({static_cast<double>(p.tokens), p.value});
    return curve;
  }
  // The lineage, root first: each ancestor up to the point its child was grown from.
  const std::vector<RunRecord> lineage = store_.lineage(run.record->id);
  double token_offset = 0;
  for (std::size_t i = 0; i < lineage.size(); ++i) {
    const RunRecord& member = lineage[i];
    const double inherited = std::max(0.0, member.inherited_flops);
    const double limit = i + 1 < lineage.size() ? std::max(0.0, lineage[i + 1].inherited_flops) - inherited
                                                : std::numeric_limits<double>::infinity();
    RunResult view;
    view.record = member;
    double tokens_at_limit = 0;
    for (const MetricPoint& p : points(view, metric)) {
      if (p.flops > limit * (1 + 1e-9)) break;
      const double x = axis == Axis::CumulativeFlops ? inherited + p.flops : token_offset + static_cast<double>(p.tokens);
      curve.push_back({x, p.value});
      tokens_at_limit = static_cast<double>(p.tokens);
    }
    // The tokens the member had seen when its child was grown: its FLOPs up to there over its
    // FLOPs per token (exact for a run without in-run growth; the final tokens otherwise).
    if (i + 1 < lineage.size()) {
      token_offset += member.flops > 0 && std::isfinite(limit) && limit < member.flops
                          ? static_cast<double>(member.tokens) * limit / member.flops
                          : std::max(tokens_at_limit, static_cast<double>(member.tokens));
    }
  }
  return curve;
}

std::vector<SeedGroup> group_by_seed(const std::vector<RunRecord>& runs) {
  std::vector<SeedGroup> groups;
  std::map<std::string, std::size_t> index;
  for (const RunRecord& r : runs) {
    std::string key = r.experiment + "\n";
    try {
      toml::table config = toml::parse(r.config);
      config.erase("name");
      if (toml::table* train = config["train"].as_table()) train->erase("seed");
      std::ostringstream text;
      text << config;
      key += text.str();
    } catch (const std::exception&) {
      key += r.name;  // an unreadable config groups with nothing else
    }
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.push_back(SeedGroup{split_seed(r.name).first, {}});
    groups[it->second].runs.push_back(&r);
  }
  return groups;
}

std::string verdict_rule() {
  return "Each comparison pairs the runs of its two sides by seed and takes the difference a - b of the quantity "
         "(of log10 FLOPs for compute). **Supported**: at least 2 pairs, and the 95% Student-t confidence interval "
         "of the mean difference lies entirely on the claimed side of 0. **Not supported**: the interval lies "
         "entirely on the other side. **Inconclusive**: otherwise (the interval contains 0, or fewer than 2 pairs). "
         "A target loss that a side never reaches counts as more compute than the other side; when it happens in "
         "only some seeds there is no interval and the verdict is inconclusive.";
}

ComparisonResult compare(const ExperimentResults& results, const ComparisonSpec& spec) {
  ComparisonResult out;
  out.spec = spec;
  const std::string where = fmt::format("comparison {}", spec.name);
  auto fail = [&](const std::string& message, const std::string& hint) -> void {
    throw UsageError(with_hint(fmt::format("{}: {}", where, message), hint));
  };
  std::map<std::int64_t, const RunResult*> side[2];
  const std::string names[2] = {spec.a, spec.b};
  for (int s = 0; s < 2; ++s) {
    const Variant* variant = nullptr;
    try {
      variant = &results.variant(names[s]);
    } catch (const UsageError& e) {
      fail(e.what(), "");
    }
    for (const RunResult* run : variant->finished()) side[s][run->seed] = run;
    if (side[s].empty()) {
      fail(fmt::format("'{}' has no finished runs (an empty group)", names[s]),
           fmt::format("run the experiment first: tfw run {}", results.experiment().path.empty()
                                                                   ? results.experiment().name
                                                                   : results.experiment().path));
    }
  }
  for (int s = 0; s < 2; ++s) {
    for (const auto& [seed, run] : side[s]) {
      if (!side[1 - s].count(seed)) {
        out.notes.push_back(fmt::format("seed {} of {} has no finished partner in {}: left out", seed, names[s],
                                        names[1 - s]));
      } else if (s == 0) {
        out.seeds.push_back(seed);
      }
    }
  }
  if (out.seeds.empty()) fail(fmt::format("{} and {} have no seed in common", spec.a, spec.b), "run both with the same seeds");

  const Axis axis = spec.at == "tokens" ? Axis::CumulativeTokens : Axis::CumulativeFlops;
  const char* axis_words = spec.at == "tokens" ? "cumulative tokens" : "cumulative FLOPs";
  for (std::int64_t seed : out.seeds) {
    const RunResult* runs[2] = {side[0][seed], side[1][seed]};
    double value[2] = {kNaN, kNaN};
    auto context = [&](int s) { return fmt::format("seed {}: run {}", seed, runs[s]->name); };
    if (spec.measure == "loss" && spec.at == "end") {
      for (int s = 0; s < 2; ++s) {
        value[s] = results.final_value(*runs[s], spec.metric);
        if (!std::isfinite(value[s])) fail(fmt::format("{} has no {} values", context(s), spec.metric), "check the metric name");
      }
    } else if (spec.measure == "loss") {
      double budget = spec.budget;
      if (!spec.budget_side.empty()) {
        const int s = spec.budget_side == "a" ? 0 : 1;
        const auto own = results.curve(*runs[s], spec.metric, axis);
        if (own.empty()) fail(fmt::format("{} has no {} values", context(s), spec.metric), "");
        budget = analysis::curve_clean(own).back().x;
      }
      for (int s = 0; s < 2; ++s) {
        try {
          value[s] = analysis::value_at(results.curve(*runs[s], spec.metric, axis), budget);
        } catch (const UsageError& e) {
          fail(fmt::format("{}: {}", context(s), e.what()), "");
        }
      }
      if (out.quantity.empty() || !spec.budget_side.empty()) {
        out.quantity = spec.budget_side.empty()
                           ? fmt::format("{} at {} {}", spec.metric, short_number(budget), axis_words)
                           : fmt::format("{} at {}'s final {} (per seed)", spec.metric, names[spec.budget_side == "a" ? 0 : 1],
                                         axis_words);
      }
    } else if (spec.measure == "compute_to_reach") {
      double target = spec.reach;
      if (!spec.reach_side.empty()) target = results.final_value(*runs[spec.reach_side == "a" ? 0 : 1], spec.metric);
      for (int s = 0; s < 2; ++s) {
        const auto reached = analysis::first_reaching(results.curve(*runs[s], spec.metric, Axis::CumulativeFlops), target);
        if (reached) {
          value[s] = *reached;
        } else {
          value[s] = std::numeric_limits<double>::infinity();
          (s == 0 ? out.unreached_a : out.unreached_b) += 1;
          out.notes.push_back(fmt::format("{} never reaches {} = {:.4f}", context(s), spec.metric, target));
        }
      }
    } else {  // forgetting
      for (int s = 0; s < 2; ++s) {
        const RunResult& run = *runs[s];
        if (run.record->parent == 0) {
          fail(fmt::format("{} was not grown from another run: forgetting compares a grown run with its parent",
                           context(s)), "name grown runs on both sides");
        }
        RunResult parent;
        parent.record = results.store().run_get(run.record->parent);
        if (!parent.record) fail(fmt::format("{}: its parent run {} is not in the store", context(s), run.record->parent), "");
        auto on_corpus = [&](const RunResult& r) {
          const std::string key = corpus_of(*r.record) == spec.corpus ? spec.metric : spec.metric + "@" + spec.corpus;
          const double v = results.final_value(r, key);
          if (!std::isfinite(v)) {
            fail(fmt::format("seed {}: run {} has no {} values", seed, r.record->name, key),
                 fmt::format("evaluate it on the earlier corpus: data.eval_corpora = [\"{}\"]", spec.corpus));
          }
          return v;
        };
        value[s] = on_corpus(run) - on_corpus(parent);
      }
    }
    out.a.push_back(value[0]);
    out.b.push_back(value[1]);
  }

  if (spec.measure == "loss" && spec.at == "end") out.quantity = fmt::format("final {}", spec.metric);
  if (spec.measure == "compute_to_reach") {
    out.quantity = spec.reach_side.empty()
                       ? fmt::format("cumulative FLOPs to first reach {} = {}", spec.metric, short_number(spec.reach))
                       : fmt::format("cumulative FLOPs to first reach {}'s final {} (per seed)",
                                     names[spec.reach_side == "a" ? 0 : 1], spec.metric);
    out.unit = "FLOPs";
    out.log_scale = true;
  } else if (spec.measure == "forgetting") {
    out.quantity = fmt::format("rise of {} on {} from the parent's end to the grown run's end", spec.metric, spec.corpus);
    out.unit = "nats/token";
  } else {
    out.unit = "nats/token";
  }
  if (spec.measure == "loss" && spec.at != "end") {
    out.notes.push_back(fmt::format("curves read at the budget by interpolating between evaluations linearly in loss "
                                    "and in log({})", spec.at == "tokens" ? "tokens" : "FLOPs"));
  }
  if (spec.measure == "compute_to_reach") {
    out.notes.push_back("the FLOPs at which a curve first reaches the target are interpolated between evaluations, "
                        "linearly in loss and in log(FLOPs)");
  }

  // Means and the paired difference, over pairs where both values are finite.
  std::vector<double> a, b;
  for (std::size_t i = 0; i < out.a.size(); ++i) {
    if (std::isfinite(out.a[i]) && std::isfinite(out.b[i])) {
      a.push_back(out.log_scale ? std::log10(out.a[i]) : out.a[i]);
      b.push_back(out.log_scale ? std::log10(out.b[i]) : out.b[i]);
    }
  }
  const bool claimed_less = spec.expect == "a < b";
  const std::size_t pairs = out.seeds.size();
  if (!a.empty()) {
    out.a_mean = analysis::mean_interval(a);
    out.b_mean = analysis::mean_interval(b);
    out.difference = analysis::paired_difference(a, b);
  }
  const std::size_t unreached = out.unreached_a + out.unreached_b;
  if (unreached > 0) {
    // Only one side failing in every pair decides; anything else has no interval.
    if (out.unreached_a == pairs && out.unreached_b == 0) {
      out.verdict = claimed_less ? "not supported" : "supported";
      out.verdict_reason = fmt::format("{} never reaches the target in any of {} seeds; {} always does", spec.a, pairs, spec.b);
    } else if (out.unreached_b == pairs && out.unreached_a == 0) {
      out.verdict = claimed_less ? "supported" : "not supported";
      out.verdict_reason = fmt::format("{} never reaches the target in any of {} seeds; {} always does", spec.b, pairs, spec.a);
    } else {
      out.verdict = "inconclusive";
      out.verdict_reason = "the target is not reached in some seeds only";
    }
    return out;
  }
  if (a.size() < 2) {
    out.verdict = "inconclusive";
    out.verdict_reason = "one pair: no confidence interval";
    return out;
  }
  const analysis::MeanInterval& d = out.difference->difference;
  const bool below = d.high < 0, above = d.low > 0;
  if ((claimed_less && below) || (!claimed_less && above)) {
    out.verdict = "supported";
    out.verdict_reason = fmt::format("the 95% CI of a - b, [{:.4g}, {:.4g}], excludes 0 on the claimed side", d.low, d.high);
  } else if ((claimed_less && above) || (!claimed_less && below)) {
    out.verdict = "not supported";
    out.verdict_reason = fmt::format("the 95% CI of a - b, [{:.4g}, {:.4g}], excludes 0 on the other side", d.low, d.high);
  } else {
    out.verdict = "inconclusive";
    out.verdict_reason = fmt::format("the 95% CI of a - b, [{:.4g}, {:.4g}], contains 0", d.low, d.high);
  }
  return out;
}

}  // namespace tfw::results
