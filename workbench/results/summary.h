// The tables that summarise an experiment over seeds: one row per variant (mean and 95% CI
// of the final validation loss), and one row per named comparison (paired difference, sign
// count, verdict). Shared by `tfw export` and `tfw report`.
#pragma once

#include <string>
#include <vector>

#include "workbench/results/results.h"
#include "workbench/results/tables.h"

namespace tfw::results {

// Per run: the results table (with the paper's numbers from `paper_path` where a run
// mirrors one) and the cost ledger.
struct RunTables {
  Table results, ledger;
};
RunTables run_tables(const ExperimentResults& results, const std::string& paper_path);

Table groups_table(const ExperimentResults& results, const std::string& metric = "val/loss");
// The groups' final val/loss, and their final val/accuracy when some run has one (an image
// classifier's), as a second table named "groups_accuracy".
std::vector<Table> groups_tables(const ExperimentResults& results);
// The `tfw eval` results of each group's finished runs (their last evaluation per corpus,
// parameter blocks and metric: loss, bits_per_byte, cloze_accuracy, cloze_logprob); no rows
// when nothing was evaluated.
Table evaluations_table(const ExperimentResults& results);
std::vector<ComparisonResult> compare_all(const ExperimentResults& results);
Table comparisons_table(const std::string& experiment, const std::vector<ComparisonResult>& comparisons);
// Tidy per-seed rows of every comparison: comparison, seed, a, b, a - b (log10 of the ratio for
// compute).
Table comparison_seeds_table(const std::string& experiment, const std::vector<ComparisonResult>& comparisons);

// "1.5123 ± 0.0101 (95% CI, n = 3)" or "1.5123 (n = 1: no interval)".
std::string mean_text(const analysis::MeanInterval& m, const char* format = "{:.4f}");

}  // namespace tfw::results
