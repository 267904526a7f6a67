// `tfw report`: one self-contained Markdown file per experiment that states, for each claim
// its comparisons test, the claim, what was measured, and the verdict from a written rule;
// with the figures, the tables over seeds and the cost ledger. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "workbench/results/results.h"

namespace tfw::results {

struct ReportOptions {
  std::string out_dir;                   // the reports, figures under out_dir/figures/EXPERIMENT/
  std::string paper_results;             // assets/paper_results.toml
  std::string command;                   // the command line, quoted in the report
  std::string tool_version;              // "tfw 0.x (LibTorch 1.13.0)"
  std::string preface;                   // Markdown put at the top of the index (several experiments)
  std::string source = "the run store";  // where the runs were read: "the run store", "the bundle FILE"
};

struct ClaimLine {
  std::string experiment, claim, paper, verdict, file;
};

// Writes out_dir/NAME.md and its figures; returns the claims it judged.
std::vector<ClaimLine> report_write(const ExperimentResults& results, const ReportOptions& options,
                                    std::vector<std::string>& written);

// The index of several reports: every claim with its verdict, linking to the reports.
std::string report_index(const std::vector<ClaimLine>& claims, const ReportOptions& options);

}  // namespace tfw::results
