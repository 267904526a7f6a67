// See results.h.
#include "workbench/results/results.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/config/run_config.h"

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
    std::stable_sort(v.runs.begin(), v.runs.end(),
                     [](const RunResult* x, const RunResult* y) { return x->seed < y->seed; });
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
      const double x =
          axis == Axis::CumulativeFlops ? inherited + p.flops : token_offset + static_cast<double>(p.tokens);
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
  std::map<std::int64_t, const RunRecord*> by_id;
  for (const RunRecord& r : runs) by_id[r.id] = &r;
  for (const RunRecord& r : runs) {
    // Where a run started is part of what it is: a run grown from another (and how) never
    // groups with one of the same config trained from scratch, nor with one grown from
    // another group. The parent is named without its seed, as a group is.
    std::string key = r.experiment + "\n";
    if (r.parent != 0) {
      const auto parent = by_id.find(r.parent);
      key += fmt::format("grown from {} with {} {}\n",
                         parent != by_id.end() ? split_seed(parent->second->name).first : "a run not among these",
                         r.growth_method, r.growth_options);
    }
    try {
      toml::table config = toml::parse(r.config);
      config.erase("name");
      if (toml::table* train = config["train"].as_table()) train->erase("seed");
      key += config_identity(config);  // the canonical form: layout and key order do not split a group
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
         "only some seeds there is no interval and the verdict is inconclusive. **Not yet decided (k of n "
         "seeds)**: the experiment file plans n seeds of both sides and only k pairs have finished; no verdict is "
         "given until all n have.";
}

namespace {

using SeedRuns = std::map<std::int64_t, const RunResult*>;  // one side's finished runs by seed
using Values = std::array<double, 2>;                       // one pair's quantity: side a, side b

[[noreturn]] void fail(const ComparisonSpec& spec, const std::string& message, const std::string& hint) {
  throw UsageError(with_hint(fmt::format("comparison {}: {}", spec.name, message), hint));
}

// Side s (0: a, 1: b) by name, and the side that "a" or "b" names.
const std::string& side_name(const ComparisonSpec& spec, int s) { return s == 0 ? spec.a : spec.b; }
int side_index(const std::string& side) { return side == "a" ? 0 : 1; }

// The runs of one seed on both sides.
struct SeedPair {
  std::int64_t seed;
  const RunResult* runs[2];
  std::string context(int s) const { return fmt::format("seed {}: run {}", seed, runs[s]->name); }
};

// Each side's finished runs; throws for a side that is no variant or has no finished run.
std::array<SeedRuns, 2> finished_sides(const ExperimentResults& results, const ComparisonSpec& spec) {
  std::array<SeedRuns, 2> side;
  for (int s = 0; s < 2; ++s) {
    const Variant* variant = nullptr;
    try {
      variant = &results.variant(side_name(spec, s));
    } catch (const UsageError& e) {
      fail(spec, e.what(), "");
    }
    for (const RunResult* run : variant->finished()) side[s][run->seed] = run;
    if (side[s].empty()) {
      fail(spec, fmt::format("'{}' has no finished runs (an empty group)", side_name(spec, s)),
           fmt::format("run the experiment first: tfw run {}",
                       results.experiment().path.empty() ? results.experiment().name : results.experiment().path));
    }
  }
  return side;
}

// The seeds both sides finished, into out.seeds, and a note for each seed without a partner.
void pair_seeds(const std::array<SeedRuns, 2>& side, const ComparisonSpec& spec, ComparisonResult& out) {
  for (int s = 0; s < 2; ++s) {
    for (const auto& [seed, run] : side[s]) {
      if (!side[1 - s].count(seed)) {
        out.notes.push_back(fmt::format("seed {} of {} has no finished partner in {}: left out", seed,
                                        side_name(spec, s), side_name(spec, 1 - s)));
      } else if (s == 0) {
        out.seeds.push_back(seed);
      }
    }
  }
  if (out.seeds.empty())
    fail(spec, fmt::format("{} and {} have no seed in common", spec.a, spec.b), "run both with the same seeds");
}

// measure = loss, at = end: each side's final value.
Values final_values(const ExperimentResults& results, const ComparisonSpec& spec, const SeedPair& pair) {
  Values value = {kNaN, kNaN};
  for (int s = 0; s < 2; ++s) {
    value[s] = results.final_value(*pair.runs[s], spec.metric);
    if (!std::isfinite(value[s]))
      fail(spec, fmt::format("{} has no {} values", pair.context(s), spec.metric), "check the metric name");
  }
  return value;
}

// measure = loss at a budget: each side's curve read at the budget (a number, or the end of
// one side's curve).
Values values_at_budget(const ExperimentResults& results, const ComparisonSpec& spec, const SeedPair& pair) {
  const Axis axis = spec.at == "tokens" ? Axis::CumulativeTokens : Axis::CumulativeFlops;
  double budget = spec.budget;
  if (!spec.budget_side.empty()) {
    const int s = side_index(spec.budget_side);
    const auto own = results.curve(*pair.runs[s], spec.metric, axis);
    if (own.empty()) fail(spec, fmt::format("{} has no {} values", pair.context(s), spec.metric), "");
    budget = analysis::curve_clean(own).back().x;
  }
  Values value = {kNaN, kNaN};
  for (int s = 0; s < 2; ++s) {
    try {
      value[s] = analysis::value_at(results.curve(*pair.runs[s], spec.metric, axis), budget);
    } catch (const UsageError& e) {
      fail(spec, fmt::format("{}: {}", pair.context(s), e.what()), "");
    }
  }
  return value;
}

// measure = compute_to_reach: the cumulative FLOPs at which each side first reaches the target
// (a loss, or one side's final value); infinite, counted and noted where it never does.
Values flops_to_reach(const ExperimentResults& results, const ComparisonSpec& spec, const SeedPair& pair,
                      ComparisonResult& out) {
  double target = spec.reach;
  if (!spec.reach_side.empty()) target = results.final_value(*pair.runs[side_index(spec.reach_side)], spec.metric);
  Values value = {kNaN, kNaN};
  for (int s = 0; s < 2; ++s) {
    const auto reached =
        analysis::first_reaching(results.curve(*pair.runs[s], spec.metric, Axis::CumulativeFlops), target);
    if (reached) {
      value[s] = *reached;
    } else {
      value[s] = std::numeric_limits<double>::infinity();
      (s == 0 ? out.unreached_a : out.unreached_b) += 1;
      out.notes.push_back(fmt::format("{} never reaches {} = {:.4f}", pair.context(s), spec.metric, target));
    }
  }
  return value;
}

// A run's final value of the metric on the earlier corpus.
double final_on_corpus(const ExperimentResults& results, const ComparisonSpec& spec, std::int64_t seed,
                       const RunResult& r) {
  const std::string key = corpus_of(*r.record) == spec.corpus ? spec.metric : spec.metric + "@" + spec.corpus;
  const double v = results.final_value(r, key);
  if (!std::isfinite(v)) {
    fail(spec, fmt::format("seed {}: run {} has no {} values", seed, r.record->name, key),
         fmt::format("evaluate it on the earlier corpus: data.eval_corpora = [\"{}\"]", spec.corpus));
  }
  return v;
}

// measure = forgetting: on each side, the grown run's final value on the earlier corpus less its parent's.
Values forgetting(const ExperimentResults& results, const ComparisonSpec& spec, const SeedPair& pair) {
  Values value = {kNaN, kNaN};
  for (int s = 0; s < 2; ++s) {
    const RunResult& run = *pair.runs[s];
    if (run.record->parent == 0) {
      fail(spec,
           fmt::format("{} was not grown from another run: forgetting compares a grown run with its parent",
                       pair.context(s)),
           "name grown runs on both sides");
    }
    RunResult parent;
    parent.record = results.store().run_get(run.record->parent);
    if (!parent.record)
      fail(spec, fmt::format("{}: its parent run {} is not in the store", pair.context(s), run.record->parent), "");
    value[s] = final_on_corpus(results, spec, pair.seed, run) - final_on_corpus(results, spec, pair.seed, parent);
  }
  return value;
}

// The pair's quantity on each side, as the comparison measures it.
Values measure(const ExperimentResults& results, const ComparisonSpec& spec, const SeedPair& pair,
               ComparisonResult& out) {
  if (spec.measure == "loss" && spec.at == "end") return final_values(results, spec, pair);
  if (spec.measure == "loss") return values_at_budget(results, spec, pair);
  if (spec.measure == "compute_to_reach") return flops_to_reach(results, spec, pair, out);
  return forgetting(results, spec, pair);
}

// The quantity compared and its unit, and notes on how its values were read.
void describe(const ComparisonSpec& spec, ComparisonResult& out) {
  const char* axis_words = spec.at == "tokens" ? "cumulative tokens" : "cumulative FLOPs";
  if (spec.measure == "loss" && spec.at == "end") {
    out.quantity = fmt::format("final {}", spec.metric);
  } else if (spec.measure == "loss") {
    out.quantity = spec.budget_side.empty()
                       ? fmt::format("{} at {} {}", spec.metric, short_number(spec.budget), axis_words)
                       : fmt::format("{} at {}'s final {} (per seed)", spec.metric,
                                     side_name(spec, side_index(spec.budget_side)), axis_words);
  }
  if (spec.measure == "compute_to_reach") {
    out.quantity = spec.reach_side.empty()
                       ? fmt::format("cumulative FLOPs to first reach {} = {}", spec.metric, short_number(spec.reach))
                       : fmt::format("cumulative FLOPs to first reach {}'s final {} (per seed)",
                                     side_name(spec, side_index(spec.reach_side)), spec.metric);
    out.unit = "FLOPs";
    out.log_scale = true;
  } else if (spec.measure == "forgetting") {
    out.quantity =
        fmt::format("rise of {} on {} from the parent's end to the grown run's end", spec.metric, spec.corpus);
    out.unit = "nats/token";
  } else {
    out.unit = "nats/token";
  }
  if (spec.measure == "loss" && spec.at != "end") {
    out.notes.push_back(
        fmt::format("curves read at the budget by interpolating between evaluations linearly in loss "
                    "and in log({})",
                    spec.at == "tokens" ? "tokens" : "FLOPs"));
  }
  if (spec.measure == "compute_to_reach") {
    out.notes.push_back(
        "the FLOPs at which a curve first reaches the target are interpolated between evaluations, "
        "linearly in loss and in log(FLOPs)");
  }
}

// Means and the paired difference, over pairs where both values are finite. Returns how many
// pairs that is.
std::size_t summarise(ComparisonResult& out) {
  std::vector<double> a, b;
  for (std::size_t i = 0; i < out.a.size(); ++i) {
    if (std::isfinite(out.a[i]) && std::isfinite(out.b[i])) {
      a.push_back(out.log_scale ? std::log10(out.a[i]) : out.a[i]);
      b.push_back(out.log_scale ? std::log10(out.b[i]) : out.b[i]);
    }
  }
  if (!a.empty()) {
    out.a_mean = analysis::mean_interval(a);
    out.b_mean = analysis::mean_interval(b);
    out.difference = analysis::paired_difference(a, b);
  }
  return a.size();
}

// The verdict when some pair has a side that never reaches the target.
void verdict_unreached(const ComparisonSpec& spec, ComparisonResult& out) {
  const bool claimed_less = spec.expect == "a < b";
  const std::size_t pairs = out.seeds.size();
  // Only one side failing in every pair decides; anything else has no interval.
  if (out.unreached_a == pairs && out.unreached_b == 0) {
    out.verdict = claimed_less ? "not supported" : "supported";
    out.verdict_reason =
        fmt::format("{} never reaches the target in any of {} seeds; {} always does", spec.a, pairs, spec.b);
  } else if (out.unreached_b == pairs && out.unreached_a == 0) {
    out.verdict = claimed_less ? "supported" : "not supported";
    out.verdict_reason =
        fmt::format("{} never reaches the target in any of {} seeds; {} always does", spec.b, pairs, spec.a);
  } else {
    out.verdict = "inconclusive";
    out.verdict_reason = "the target is not reached in some seeds only";
  }
}

// The verdict from the 95% confidence interval of the mean difference.
void verdict_from_interval(const ComparisonSpec& spec, ComparisonResult& out) {
  const bool claimed_less = spec.expect == "a < b";
  const analysis::MeanInterval& d = out.difference->difference;
  const bool below = d.high<0, above = d.low> 0;
  const std::string interval = fmt::format("the 95% CI of a - b, [{:.4g}, {:.4g}]", d.low, d.high);
  if ((claimed_less && below) || (!claimed_less && above)) {
    out.verdict = "supported";
    out.verdict_reason = interval + ", excludes 0 on the claimed side";
  } else if ((claimed_less && above) || (!claimed_less && below)) {
    out.verdict = "not supported";
    out.verdict_reason = interval + ", excludes 0 on the other side";
  } else {
    out.verdict = "inconclusive";
    out.verdict_reason = interval + ", contains 0";
  }
}

// The verdict (see verdict_rule), given the number of pairs with finite values on both sides.
void judge(const ComparisonSpec& spec, ComparisonResult& out, std::size_t finite_pairs) {
  if (out.unreached_a + out.unreached_b > 0) {
    verdict_unreached(spec, out);
  } else if (finite_pairs < 2) {
    out.verdict = "inconclusive";
    out.verdict_reason = "one pair: no confidence interval";
  } else {
    verdict_from_interval(spec, out);
  }
}

// Each side's seeds: the experiment file's plan of them, or those it has finished.
std::array<std::set<std::int64_t>, 2> side_seeds(const ExperimentResults& results, const ComparisonSpec& spec,
                                                 bool finished) {
  std::array<std::set<std::int64_t>, 2> seeds;
  for (int s = 0; s < 2; ++s) {
    for (const RunResult* run : results.variant(side_name(spec, s)).runs) {
      if (!finished || run->finished()) seeds[s].insert(run->seed);
    }
  }
  return seeds;
}

std::size_t in_both(const std::array<std::set<std::int64_t>, 2>& seeds) {
  return static_cast<std::size_t>(
      std::count_if(seeds[0].begin(), seeds[0].end(), [&](std::int64_t seed) { return seeds[1].count(seed) > 0; }));
}

}  // namespace

ComparisonResult compare(const ExperimentResults& results, const ComparisonSpec& spec) {
  ComparisonResult out;
  out.spec = spec;
  // An experiment read from its file plans its seeds; one built up a piece at a time may not
  // have finished any seed on both sides yet (a side that has not run, or other seeds on each).
  std::size_t planned = 0;
  if (results.from_file()) {
    planned = in_both(side_seeds(results, spec, false));
    const std::array<std::set<std::int64_t>, 2> done = side_seeds(results, spec, true);
    if (planned > 0 && in_both(done) == 0) {
      describe(spec, out);
      out.verdict = "not yet decided";
      out.verdict_reason = fmt::format("0 of {} seeds: {}", planned,
                                       done[0].empty() && done[1].empty() ? "neither side has finished a run yet"
                                       : done[1].empty()                  ? spec.b + " has not finished a run yet"
                                       : done[0].empty()                  ? spec.a + " has not finished a run yet"
                                                                          : "no seed has finished on both sides yet");
      return out;
    }
  }
  const std::array<SeedRuns, 2> sides = finished_sides(results, spec);
  pair_seeds(sides, spec, out);
  for (std::int64_t seed : out.seeds) {
    const SeedPair pair{seed, {sides[0].at(seed), sides[1].at(seed)}};
    const Values value = measure(results, spec, pair, out);
    out.a.push_back(value[0]);
    out.b.push_back(value[1]);
  }
  describe(spec, out);
  judge(spec, out, summarise(out));
  if (out.seeds.size() < planned) {
    out.verdict_reason =
        fmt::format("{} of {} seeds; so far {}: {}", out.seeds.size(), planned, out.verdict, out.verdict_reason);
    out.verdict = "not yet decided";
  }
  return out;
}

}  // namespace tfw::results
