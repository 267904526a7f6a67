// Scaling-schedule designer: start from a run config, add stages (each grows the previous
// one with a growth method and trains on for its own budget), and see the predicted
// parameters, FLOPs per stage and cumulative budget against training the final size from
// scratch on the same tokens, as numbers and a chart. Save it as an experiment file and
// launch it (a `tfw run` child process; its runs appear in the Runs tab as they start).
// The predictions are the engine's plan of the saved file (designer.h).
#include <imgui.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "workbench/gui/app.h"
#include "workbench/gui/designer.h"
#include "workbench/gui/plot.h"
#include "workbench/results/fit.h"

namespace fs = std::filesystem;

namespace tfw::gui {

namespace {

class DesignerPanel : public LazyPanel {
 public:
  const char* name() const override { return "designer"; }
  const char* title() const override { return "Schedule designer"; }

  void draw_view(App& app) override {
    ImGui::BeginChild("design", ImVec2(ImGui::GetContentRegionAvail().x * 0.52f, 0), false);
    edit(app);
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("prediction", ImVec2(0, 0), false);
    if (dirty_) {
      prediction_ = design_predict(*app.registry, design_);
      predict_losses(app);
      dirty_ = false;
      ++version_;
    }
    show_prediction();
    ImGui::EndChild();
  }

 private:
  void initialise(App& app) override {
    design_.base_config = app.options.configs.empty() ? "" : app.options.configs.front();
    if (design_.base_config.empty()) {
      for (const std::string& path : app.config_files()) {
        if (path.find("quickstart-tokenformer.toml") != std::string::npos) design_.base_config = path;
      }
    }
    std::snprintf(name_, sizeof(name_), "%s", design_.name.c_str());
    add_stage(app);
    add_stage(app);
    add_stage(app);
    update_path();
  }

  void update_path() { std::snprintf(path_, sizeof(path_), "experiments/%s.toml", name_); }

  // A new stage: for a Tokenformer, double the previous stage's parameter tokens.
  void add_stage(App& app) {
    DesignStage stage;
    stage.tokens = 1e6;
    if (!design_.stages.empty()) {
      stage.method = design_.stages.back().method.empty() ? "pattention_grow" : design_.stages.back().method;
      stage.options = design_.stages.back().options.empty() ? "key_init = \"zero\", optimizer = \"reset\""
                                                            : design_.stages.back().options;
      try {
        ModelConfig base = model_config_load(*app.registry, design_.base_config);
        const toml::table model = base.spec->to_toml();
        if (model.contains("n_attn") && model.contains("n_ffn")) {  // a Tokenformer, of text or images
          const std::int64_t factor = std::int64_t{1} << design_.stages.size();
          stage.model_changes =
              fmt::format("n_attn = {}, n_ffn = {}", model["n_attn"].value_or<std::int64_t>(0) * factor,
                          model["n_ffn"].value_or<std::int64_t>(0) * factor);
        }
      } catch (const std::exception&) {
        // The prediction shows what is wrong with the base config.
      }
    }
    design_.stages.push_back(stage);
    dirty_ = true;
  }

  void edit(App& app) {
    if (ImGui::InputText("name", name_, sizeof(name_))) {
      design_.name = name_;
      update_path();
      dirty_ = true;
    }
    ImGui::SetNextItemWidth(-120);
    // A path too long for the box shows its file name (the whole path in the tooltip).
    std::string preview = design_.base_config.empty() ? "choose..." : design_.base_config;
    const float room = ImGui::GetContentRegionAvail().x - 120 - ImGui::GetFrameHeight() - 8;
    if (ImGui::CalcTextSize(preview.c_str()).x > room) preview = ".../" + fs::path(preview).filename().string();
    const bool open = ImGui::BeginCombo("base config", preview.c_str());
    if (!open && ImGui::IsItemHovered() && !design_.base_config.empty())
      ImGui::SetTooltip("%s", design_.base_config.c_str());
    if (open) {
      for (const std::string& path : app.config_files()) {
        if (ImGui::Selectable(path.c_str(), path == design_.base_config)) {
          design_.base_config = path;
          dirty_ = true;
        }
      }
      ImGui::EndCombo();
    }
    help_marker(
        "A run config (family, [model], [data], [train]). Stage 1 trains it from scratch; every later stage "
        "grows the one before it and trains on.");
    std::vector<std::string> methods;
    try {
      methods = app.registry->family(model_config_load(*app.registry, design_.base_config).family).growth_methods();
    } catch (const std::exception&) {}
    ImGui::Separator();
    int remove = -1;
    for (std::size_t k = 0; k < design_.stages.size(); ++k) {
      DesignStage& stage = design_.stages[k];
      ImGui::PushID(static_cast<int>(k));
      ImGui::Text("stage %zu", k + 1);
      ImGui::SameLine(90);
      if (k == 0) {
        ImGui::TextDisabled("from scratch");
      } else {
        ImGui::SetNextItemWidth(130);  // with the tokens field and "remove", one row at 1000 px
        if (ImGui::BeginCombo("method", stage.method.c_str())) {
          for (const std::string& method : methods) {
            if (ImGui::Selectable(method.c_str(), method == stage.method)) {
              stage.method = method;
              dirty_ = true;
            }
          }
          ImGui::EndCombo();
        }
      }
      ImGui::SameLine();
      double tokens = stage.tokens;
      ImGui::SetNextItemWidth(90);
      if (ImGui::InputDouble("tokens", &tokens, 0, 0, "%.3g") && tokens > 0) {
        stage.tokens = tokens;
        dirty_ = true;
      }
      if (design_.stages.size() > 1) {
        ImGui::SameLine();
        if (ImGui::SmallButton("remove")) remove = static_cast<int>(k);
      }
      dirty_ |= text_field("model changes", stage.model_changes, "[model] keys, e.g. n_attn = 128, n_ffn = 512");
      if (k > 0)
        dirty_ |= text_field("growth options", stage.options, "e.g. key_init = \"zero\", optimizer = \"reset\"");
      ImGui::Separator();
      ImGui::PopID();
    }
    if (remove >= 0) {
      design_.stages.erase(design_.stages.begin() + remove);
      dirty_ = true;
    }
    if (ImGui::Button("add stage")) add_stage(app);
    ImGui::SameLine();
    if (ImGui::Checkbox("include the from-scratch control run", &design_.scratch_control)) dirty_ = true;
    ImGui::Spacing();
    ImGui::SetNextItemWidth(-170);
    ImGui::InputText("##path", path_, sizeof(path_));
    ImGui::SameLine();
    ImGui::Checkbox("overwrite", &overwrite_);
    const bool valid = prediction_.error.empty() && !prediction_.stages.empty();
    ImGui::BeginDisabled(!valid);
    if (ImGui::Button("save")) save();
    ImGui::SameLine();
    if (ImGui::Button("save and launch")) {
      if (save()) launch(app);
    }
    ImGui::EndDisabled();
    help_marker(
        "Launch submits the file to the engine service (embedded in the GUI unless a `tfw serve` serves this "
        "TFW_HOME or --connect names one); its runs appear in the Runs tab and update live. Closing the GUI "
        "stops its embedded service's jobs at a checkpoint; they resume at the next start.");
    if (!message_.empty()) text_wrapped_at_spaces(message_);
  }

  static bool text_field(const char* label, std::string& value, const char* hint) {
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%s", value.c_str());
    ImGui::SetNextItemWidth(-130);
    if (ImGui::InputTextWithHint(label, hint, buffer, sizeof(buffer))) {
      value = buffer;
      return true;
    }
    return false;
  }

  bool save() {
    const std::string error = design_save(design_, path_, overwrite_);
    message_ = error.empty() ? fmt::format("saved {}", path_) : error;
    if (error.empty()) overwrite_ = true;  // later saves of this design update the file
    return error.empty();
  }

  // Through the engine service: the embedded one, this TFW_HOME's `tfw serve`, or --connect.
  void launch(App& app) {
    if (!app.service) {
      message_ = "no engine service in a screenshot";
      return;
    }
    try {
      const nlohmann::json reply = app.service->submit_file(path_);
      message_ = fmt::format("job {} queued on the {}: runs {}. They appear in the Runs tab as they start.",
                             reply["job"].get<std::int64_t>(), app.service->description(), reply["runs"].dump());
    } catch (const std::exception& e) {
      message_ = e.what();
    }
  }

  // The family's scaling law from the finished runs in the store, fitted once per family and
  // corpus while the GUI is open (a fit takes about a second).
  void predict_losses(App& app) {
    if (!prediction_.error.empty() || prediction_.family.empty()) return;
    const std::string key = prediction_.family + "\n" + prediction_.corpus;
    try {
      if (key != fit_key_) {
        fit_key_ = key;
        fit_error_.clear();
        fit_.reset();
        const std::string db = app.home + "/runs.db";
        if (!std::filesystem::exists(db))
          throw UsageError("the store is empty: no finished runs to fit a scaling law to");
        auto store = Store::open_readonly(db);
        fit_ = results::family_fit(*store, prediction_.family, prediction_.corpus);
      }
    } catch (const std::exception& e) {
      fit_error_ = e.what();
    }
    if (fit_) {
      design_predict_losses(prediction_, fit_->fit, fit_->runs.size());
    } else {
      prediction_.loss_note = "No predicted losses: " + fit_error_;
    }
  }

  void show_prediction() {
    if (!prediction_.error.empty()) {
      ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "The design does not plan:");
      text_wrapped_at_spaces(prediction_.error);
      return;
    }
    const ImGuiTableFlags flags =
        ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
    // Narrow (1000 px windows): no growth column (the form beside it names each method) and a
    // short name for the control run, so that no column is cut.
    const bool wide = ImGui::GetContentRegionAvail().x > 640;
    if (ImGui::BeginTable("predicted", wide ? 7 : 6, flags)) {
      for (const char* column : {"stage", "growth", "params", "tokens", "stage FLOPs", "cum. FLOPs", "loss (law)"}) {
        if (wide || std::string_view(column) != "growth") ImGui::TableSetupColumn(column);
      }
      ImGui::TableHeadersRow();
      const double error = prediction_.loss_error;
      auto row = [error, wide](const StagePrediction& s, const char* name) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(name);
        if (wide) {
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(s.growth.empty() ? "-" : s.growth.c_str());
        }
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(short_count(static_cast<double>(s.parameters)).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(short_count(s.tokens).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(scientific_label(s.flops).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(scientific_label(s.cumulative_flops).c_str());
        ImGui::TableNextColumn();
        if (std::isfinite(s.predicted_loss)) {
          ImGui::Text("%.3f \u00b1%.1f%%%s", s.predicted_loss, 100 * error, s.extrapolated ? "*" : "");
        } else {
          ImGui::TextDisabled("-");
        }
      };
      for (const StagePrediction& s : prediction_.stages) row(s, s.name.c_str());
      row(prediction_.scratch, wide ? "final size from scratch" : "from scratch");
      ImGui::EndTable();
    }
    const double grown = prediction_.stages.empty() ? 0 : prediction_.stages.back().cumulative_flops;
    const double scratch = prediction_.scratch.flops;
    if (scratch > 0) {
      text_wrapped_at_spaces(
          fmt::format("The schedule spends {} FLOPs: {:.1f}% of training the final size ({} parameters) from scratch "
                      "on the same {} "
                      "tokens ({}).",
                      scientific_label(grown), 100.0 * grown / scratch,
                      short_count(static_cast<double>(prediction_.scratch.parameters)),
                      short_count(prediction_.scratch.tokens), scientific_label(scratch)));
    }
    if (!prediction_.loss_note.empty()) text_wrapped_at_spaces(prediction_.loss_note);
    // Cumulative FLOPs against tokens: the schedule (a kink at every growth) and from scratch.
    chart_tokens_ = {0};
    chart_flops_ = {0};
    for (const StagePrediction& s : prediction_.stages) {
      chart_tokens_.push_back(s.cumulative_tokens);
      chart_flops_.push_back(s.cumulative_flops);
    }
    scratch_tokens_ = {0, prediction_.scratch.tokens};
    scratch_flops_ = {0, scratch};
    Plot plot;
    plot.id = "designer";
    plot.x_label = "tokens trained";
    plot.y_label = "cumulative training FLOPs";
    plot.lines.push_back({"growth schedule", &chart_tokens_, &chart_flops_, series_colour(0), 2.0f, false, version_});
    plot.lines.push_back({"", &chart_tokens_, &chart_flops_, series_colour(0), 1.0f, true, version_});
    plot.lines.push_back(
        {"final size from scratch", &scratch_tokens_, &scratch_flops_, series_colour(1), 2.0f, false, version_});
    for (std::size_t k = 1; k < prediction_.stages.size(); ++k) {
      plot.markers.push_back(
          {prediction_.stages[k - 1].cumulative_tokens, IM_COL32(200, 200, 200, 120),
           fmt::format("growth into {} ({})", prediction_.stages[k].name, prediction_.stages[k].growth)});
    }
    plot_draw(plot);
  }

  bool dirty_ = true, overwrite_ = false;
  std::uint64_t version_ = 0;
  Design design_;
  DesignPrediction prediction_;
  std::string fit_key_, fit_error_;
  std::optional<results::FamilyFit> fit_;
  char name_[128] = "", path_[512] = "";
  std::string message_;
  std::vector<double> chart_tokens_, chart_flops_, scratch_tokens_, scratch_flops_;
};

}  // namespace

std::unique_ptr<Panel> make_designer_panel() { return std::make_unique<DesignerPanel>(); }

}  // namespace tfw::gui
