// The scaling-schedule designer's model, free of ImGui so tests can check it: a schedule is
// a base run config and a list of stages (the first trains from scratch, each later one grows
// its predecessor with a growth method and trains on), which becomes an experiment file
// (docs/experiments.md). Predictions come from planning that text in memory with the engine's
// experiment_parse, the same plan `tfw run --dry-run` prints, plus a control that trains the
// final size from scratch on the schedule's total tokens.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "analysis/scaling_law.h"

namespace tfw {
class Registry;
}

namespace tfw::gui {

struct DesignStage {
  std::string method;         // the growth method into this stage ("" for the first stage)
  std::string model_changes;  // [model] keys this stage changes, inline TOML: "n_attn = 128, n_ffn = 512"
  std::string options;        // the growth method's options, inline TOML: "optimizer = \"reset\""
  double tokens = 1e6;        // this stage's training budget
};

struct Design {
  std::string name = "my-schedule";
  std::string base_config;  // a run config file: family, [model], [data], [train]
  std::vector<DesignStage> stages;
  bool scratch_control = true;  // add the final size trained from scratch to the saved file
};

struct StagePrediction {
  std::string name, growth;
  std::int64_t parameters = 0;
  double tokens = 0, flops = 0, cumulative_tokens = 0, cumulative_flops = 0;
  // The from-scratch scaling law at this size and the tokens seen so far (cumulative): NaN
  // without a fit. For a grown stage it is not a prediction of growth: the law knows none.
  double predicted_loss = std::numeric_limits<double>::quiet_NaN();
  bool extrapolated = false;  // outside the fitted runs' sizes or tokens
};

struct DesignPrediction {
  std::vector<StagePrediction> stages;
  StagePrediction scratch;     // the final size from scratch on all the schedule's tokens
  std::string error;           // the engine's message when the design is invalid
  std::string family, corpus;  // of the base config: the scaling law to use
  // How the predicted losses were made (the law, its runs and error), or why there are none.
  std::string loss_note;
  double loss_error = 0;  // the fit's rms relative error
};

// Fills each stage's and the control's predicted loss from a family's fitted law.
void design_predict_losses(DesignPrediction& prediction, const analysis::ScalingFit& fit, std::size_t runs);

// The experiment file for a design; `config_dir` is the folder the file will live in
// (base_config is written relative to it).
std::string design_to_toml(const Design& design, const std::string& config_dir, bool with_control);

// Plans the design through experiment_parse (every key validated, every growth planned).
DesignPrediction design_predict(const Registry& registry, const Design& design);

// Writes the experiment file to `path` (refusing to overwrite unless `overwrite`); returns
// an error message or "".
std::string design_save(const Design& design, const std::string& path, bool overwrite);

}  // namespace tfw::gui
