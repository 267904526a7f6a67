// See designer.h.
#include "workbench/gui/designer.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <toml++/toml.h>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "engine/plugin/registry.h"
#include "workbench/common/format.h"

namespace fs = std::filesystem;

namespace tfw::gui {

namespace {

std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string trimmed(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\n") - begin + 1);
}

std::string stage_name(std::size_t k) { return fmt::format("stage{}", k + 1); }

// Merges the inline-TOML key list `changes` into `into` (later stages win key by key).
// Text that does not parse is kept for the engine to report with its position.
void merge_changes(toml::table& into, const std::string& changes, std::string& unparsed) {
  toml::table parsed;
  try {
    parsed = toml::parse("m = { " + changes + " }");
  } catch (const toml::parse_error&) {
    unparsed += (unparsed.empty() ? "" : ", ") + changes;
    return;
  }
  std::function<void(toml::table&, toml::table&)> merge = [&](toml::table& to, toml::table& from) {
    for (auto& [key, node] : from) {
      if (node.is_table() && to.get(key) && to.get(key)->is_table())
        merge(*to.get(key)->as_table(), *node.as_table());
      else
        to.insert_or_assign(key, std::move(node));
    }
  };
  merge(into, *parsed["m"].as_table());
}

// An inline table's body: "a = 1, b.c = 'x'" (nested tables as dotted keys).
std::string inline_body(const toml::table& table, const std::string& prefix = "") {
  std::string out;
  for (const auto& [key, node] : table) {
    const std::string name = prefix + std::string(key.str());
    std::string item;
    if (const toml::table* nested = node.as_table()) {
      item = inline_body(*nested, name + ".");
    } else {
      std::ostringstream value;
      node.visit([&](const auto& v) { value << v; });
      item = name + " = " + value.str();
    }
    if (!item.empty()) out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

}  // namespace

std::string design_to_toml(const Design& design, const std::string& config_dir, bool with_control) {
  std::string base = design.base_config;
  if (!base.empty() && !config_dir.empty()) {
    std::error_code error;
    fs::path relative = fs::relative(fs::absolute(base), fs::absolute(config_dir), error);
    if (!error && !relative.empty()) base = relative.string();
  }
  std::string out = fmt::format(
      "# A scaling schedule designed in `tfw gui` (designer). Run it with `tfw run FILE`.\n"
      "[experiment]\nname = {}\ndescription = {}\n",
      toml_string(design.name),
      toml_string(
          fmt::format("{} stages from {}", design.stages.size(), fs::path(design.base_config).filename().string())));
  // The changes so far: each stage's [model] is the base changed by every stage up to it.
  toml::table changes_so_far;
  std::string unparsed, model;
  double total_tokens = 0;
  for (std::size_t k = 0; k < design.stages.size(); ++k) {
    const DesignStage& stage = design.stages[k];
    const std::string changes = trimmed(stage.model_changes);
    if (!changes.empty()) merge_changes(changes_so_far, changes, unparsed);
    model = inline_body(changes_so_far);
    if (!unparsed.empty()) model += (model.empty() ? "" : ", ") + unparsed;
    total_tokens += stage.tokens;
    out += fmt::format("\n[runs.{}]\nconfig = {}\n", stage_name(k), toml_string(base));
    if (k > 0) {
      out += fmt::format("parent = \"{}\"\ngrowth = {{ method = {}, options = {{ {} }} }}\n", stage_name(k - 1),
                         toml_string(stage.method), trimmed(stage.options));
    }
    if (!model.empty()) out += fmt::format("model = {{ {} }}\n", model);
    // The stage's budget replaces whichever budget the base config sets (0 = unset).
    out += fmt::format("train = {{ max_tokens = {:.6g}, max_steps = 0, max_flops = 0 }}\n", stage.tokens);
  }
  if (with_control && !design.stages.empty()) {
    out += fmt::format(
        "\n# The control: the final size trained from scratch on all the schedule's tokens.\n"
        "[runs.scratch]\nconfig = {}\n",
        toml_string(base));
    if (!model.empty()) out += fmt::format("model = {{ {} }}\n", model);
    out += fmt::format("train = {{ max_tokens = {:.6g}, max_steps = 0, max_flops = 0 }}\n", total_tokens);
  }
  return out;
}

DesignPrediction design_predict(const Registry& registry, const Design& design) {
  DesignPrediction prediction;
  if (design.base_config.empty()) {
    prediction.error = "choose a base run config";
    return prediction;
  }
  if (design.stages.empty()) {
    prediction.error = "add a stage";
    return prediction;
  }
  // Planned in memory, as the file the designer saves would be (base_config absolute).
  try {
    Design absolute = design;
    absolute.base_config = fs::absolute(design.base_config).string();
    const toml::table table = toml::parse(design_to_toml(absolute, "", true), std::string("design"));
    Experiment experiment = experiment_parse(registry, table, "design", fs::current_path().string());
    if (!experiment.runs.empty()) {
      prediction.family = experiment.runs.front().config.model.family;
      prediction.corpus = data_name(experiment.runs.front().config.data);
    }
    double tokens = 0;
    for (const ExperimentRun& run : experiment.runs) {
      StagePrediction stage;
      stage.name = run.name;
      stage.growth = run.growth_method;
      stage.parameters = run.config.model.spec->parameter_count();
      stage.tokens = static_cast<double>(run.plan.tokens_per_step) * static_cast<double>(run.plan.total_steps);
      stage.flops = run.flops;
      stage.cumulative_flops = run.cumulative_flops;
      if (run.name == "scratch") {
        stage.cumulative_tokens = stage.tokens;
        prediction.scratch = stage;
      } else {
        tokens += stage.tokens;
        stage.cumulative_tokens = tokens;
        prediction.stages.push_back(stage);
      }
    }
  } catch (const toml::parse_error& e) {
    prediction.error = fmt::format("design: {} at line {}", e.description(), e.source().begin.line);
    prediction.stages.clear();
  } catch (const std::exception& e) {
    prediction.error = e.what();
    prediction.stages.clear();
  }
  return prediction;
}

void design_predict_losses(DesignPrediction& prediction, const analysis::ScalingFit& fit, std::size_t runs) {
  const analysis::ScalingLaw& law = fit.law;
  bool outside = false;
  auto predict = [&](StagePrediction& stage, double tokens) {
    stage.predicted_loss = law.predict(static_cast<double>(stage.parameters), tokens);
    stage.extrapolated = !fit.covers(static_cast<double>(stage.parameters), tokens);
    outside = outside || stage.extrapolated;
  };
  for (StagePrediction& stage : prediction.stages) predict(stage, stage.cumulative_tokens);
  predict(prediction.scratch, prediction.scratch.tokens);
  prediction.loss_error = fit.rms_log_error;
  prediction.loss_note = fmt::format(
      "Predicted losses: the from-scratch scaling law of {} on {} (L = {:.3f} + {:.3g}/N^{:.3f} + {:.3g}/D^{:.3f}, "
      "fitted to {} finished runs, {:.1f}% rms error). A grown stage's value is that law at its size and the tokens "
      "seen so far: the law knows nothing of growth, so it is what training from scratch would give, not a forecast "
      "of the growth.",
      prediction.family, prediction.corpus, law.E, law.A, law.alpha, law.B, law.beta, runs, 100 * fit.rms_log_error);
  if (outside) {
    prediction.loss_note += fmt::format(
        " Values marked * lie outside the fitted runs (N {} to {}, D {} to {}): extrapolations, to be trusted less.",
        short_count(fit.n_min), short_count(fit.n_max), short_count(fit.d_min), short_count(fit.d_max));
  }
}

std::string design_save(const Design& design, const std::string& path, bool overwrite) {
  if (path.empty()) return "choose a file name";
  if (fs::exists(path) && !overwrite) return fmt::format("{} exists: tick 'overwrite' or choose another name", path);
  std::error_code error;
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) fs::create_directories(dir, error);
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp);
    out << design_to_toml(design, dir.empty() ? "." : dir.string(), design.scratch_control);
    if (!out.flush()) return fmt::format("cannot write {}", path);
  }
  fs::rename(temp, path, error);
  if (error) return fmt::format("cannot write {}: {}", path, error.message());
  return "";
}

}  // namespace tfw::gui
