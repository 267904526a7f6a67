// An experiment's results as the analysis sees them: each planned run with its store record
// (if it ran), grouped into variants (runs that differ only in seed), with curves on the
// lineage's cumulative axes, and the experiment's named comparisons evaluated. Used by
// `tfw export`, `tfw report` and `tfw runs compare`. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/curves.h"
#include "analysis/stats.h"
#include "engine/config/experiment.h"
#include "storage/store.h"

namespace tfw::results {

// The x axis of a curve: the lineage's cumulative training FLOPs or tokens (a grown run's
// points follow its ancestors'), or the run's own tokens.
enum class Axis { CumulativeFlops, CumulativeTokens, OwnTokens };

struct RunResult {
  std::string name, variant;
  std::int64_t seed = -1;
  const ExperimentRun* planned = nullptr;  // null when the experiment came from the store alone
  std::optional<RunRecord> record;         // absent: not run
  bool finished() const { return record && record->status == RunStatus::finished; }
};

struct Variant {
  std::string name;
  std::vector<const RunResult*> runs;  // by seed
  std::vector<const RunResult*> finished() const;
};

class ExperimentResults {
 public:
  // From an experiment file's plan (order, seeds, comparisons) and the store.
  ExperimentResults(Store& store, Experiment experiment);
  // From the store alone (an experiment name): variants from names ending in -sN.
  ExperimentResults(Store& store, const std::string& experiment_name);

  const Experiment& experiment() const { return experiment_; }
  const std::vector<RunResult>& runs() const { return runs_; }
  const std::vector<Variant>& variants() const { return variants_; }
  const Variant& variant(const std::string& name) const;
  const RunResult* run(const std::string& name) const;
  bool from_file() const { return from_file_; }

  // A metric of one run: its own points, or its lineage's (ancestors first) on a cumulative axis.
  std::vector<analysis::CurvePoint> curve(const RunResult& run, const std::string& metric, Axis axis) const;
  // The run's last value of the metric (NaN when it has none).
  double final_value(const RunResult& run, const std::string& metric) const;
  // The training corpora of the finished runs (as their configs name them).
  std::set<std::string> corpora() const;
  // The run's own points of a metric, raw.
  std::vector<MetricPoint> points(const RunResult& run, const std::string& metric) const;

  Store& store() const { return store_; }

 private:
  void group();
  Store& store_;
  Experiment experiment_;
  bool from_file_ = false;
  std::vector<RunResult> runs_;
  std::vector<Variant> variants_;
  mutable std::map<std::pair<std::int64_t, std::string>, std::vector<MetricPoint>> cache_;
};

// A run's points of a metric: a recorded metric ("val/loss@kjv"), or "eval/METRIC@CORPUS" for
// its `tfw eval` results (METRIC: loss, bits_per_byte, cloze_accuracy, cloze_logprob, ...).
std::vector<MetricPoint> metric_points(Store& store, std::int64_t run, const std::string& metric);

// Runs that differ only in seed: the same experiment and the same resolved config once
// train.seed and the name are set aside. Groups keep the order of their first run.
struct SeedGroup {
  std::string label;  // the first run's name without its seed suffix -sN
  std::vector<const RunRecord*> runs;
};
std::vector<SeedGroup> group_by_seed(const std::vector<RunRecord>& runs);

// One named comparison, evaluated over the seeds both sides finished.
struct ComparisonResult {
  ComparisonSpec spec;
  std::vector<std::int64_t> seeds;                       // the pairs, by seed
  std::vector<double> a, b;                              // the quantity per pair (loss; FLOPs to reach; rise in loss)
  std::vector<std::string> notes;                        // unpaired seeds, targets not reached, how values were read
  std::string quantity, unit;                            // "val/loss at 1.2e13 cumulative FLOPs", "nats/token"
  bool log_scale = false;                                // compute: the difference is of log10 FLOPs (a ratio)
  std::optional<analysis::PairedDifference> difference;  // a - b (log10 a - log10 b when log_scale)
  analysis::MeanInterval a_mean, b_mean;                 // of the quantity on each side (of log10 when log_scale)
  std::size_t unreached_a = 0, unreached_b = 0;
  std::string verdict;  // supported, not supported, inconclusive
  std::string verdict_reason;
};

// Throws UsageError naming the comparison for an empty group or a budget outside a curve.
ComparisonResult compare(const ExperimentResults& results, const ComparisonSpec& spec);

// The rule every verdict follows, in one sentence, for the report.
std::string verdict_rule();

}  // namespace tfw::results
