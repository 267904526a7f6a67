// The scaling law of one family, fitted to its finished runs from scratch in the store
// (analysis/scaling_law.h): what `tfw fit` prints and what the schedule designer predicts
// final losses with. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "analysis/scaling_law.h"
#include "storage/store.h"

namespace tfw::results {

struct FamilyFit {
  std::string family, corpus, tokenizer;
  analysis::ScalingFit fit;
  std::vector<std::string> runs;  // the runs used
};

// Finished runs of `family` from scratch (no parent, no in-run growth) with a final
// validation loss, on `corpus` (empty: the only corpus they use; several is an error that
// lists them). Throws UsageError when there are fewer than five distinct (N, D) points.
// `experiments` (empty: all) restricts the runs to those experiments: runs of one family can
// differ in more than size (a norm ablation), and the law assumes they do not.
FamilyFit family_fit(Store& store, const std::string& family, const std::string& corpus = "",
                     const std::vector<std::string>& experiments = {});

}  // namespace tfw::results
