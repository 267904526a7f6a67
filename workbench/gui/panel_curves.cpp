// Loss curves: the selected runs overlaid; x axis steps, tokens, training FLOPs, cumulative
// FLOPs (the lineage's budget: a grown run starts where its parent's compute ended) or wall
// time; linear or log axes; EMA smoothing; legend toggles; hover read-out; growth events
// marked; zoom and pan (plot.h). Derived columns are cached per series, so a frame costs
// only the drawing.
#include <imgui.h>

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "workbench/gui/app.h"
#include "workbench/gui/plot.h"

namespace tfw::gui {

namespace {

const char* kAxes[] = {"steps", "tokens", "flops", "cumulative_flops", "wall"};
const char* kAxisLabels[] = {"step", "tokens", "training FLOPs", "cumulative FLOPs", "wall time (s)"};

// The x column of a series for axis k.
std::vector<double> x_column(const Series& s, int k, double inherited) {
  switch (k) {
    case 0: return s.step;
    case 1: return s.tokens;
    case 2: return s.flops;
    case 3: {
      std::vector<double> x = s.flops;
      for (double& v : x) v += inherited;
      return x;
    }
    default: return s.wall;
  }
}

// x at `step`, interpolated along the series (for event markers).
double x_at_step(const Series& s, const std::vector<double>& x, double step) {
  if (s.step.empty()) return std::nan("");
  auto it = std::lower_bound(s.step.begin(), s.step.end(), step);
  if (it == s.step.end()) return x.back();
  const std::size_t i = static_cast<std::size_t>(it - s.step.begin());
  if (i == 0 || s.step[i] == step) return x[i];
  const double f = (step - s.step[i - 1]) / (s.step[i] - s.step[i - 1]);
  return x[i - 1] + f * (x[i] - x[i - 1]);
}

class CurvesPanel : public Panel {
 public:
  const char* name() const override { return "curves"; }
  const char* title() const override { return "Loss curves"; }

  void draw(App& app) override {
    if (!initialised_) {
      metric_ = app.options.metric;
      for (int k = 0; k < IM_ARRAYSIZE(kAxes); ++k) {
        if (app.options.x_axis == kAxes[k]) axis_ = k;
      }
      log_x_ = app.options.log_x;
      log_y_ = app.options.log_y;
      smoothing_ = static_cast<float>(app.options.smoothing);
      initialised_ = true;
    }
    if (app.selected.empty()) {
      empty_state("No runs selected", "Tick runs in the Runs tab (or pass --select ID,... to `tfw gui`) to overlay "
                                      "their curves here.");
      return;
    }
    controls(app);
    Plot plot;
    plot.id = "curves";
    plot.x_label = kAxisLabels[axis_];
    plot.y_label = metric_;
    plot.log_x = log_x_;
    plot.log_y = log_y_;
    plot.empty_text = fmt::format("no '{}' points in the selected runs yet", metric_);
    std::size_t colour = 0;
    for (std::int64_t id : app.selected) {
      auto found = app.snapshot->data.find(id);
      const ImU32 line_colour = series_colour(colour++);
      if (found == app.snapshot->data.end()) continue;
      const RunData& data = *found->second;
      const Series* series = data.series(metric_);
      if (!series) continue;
      Columns& columns = columns_for(data, *series);
      plot.lines.push_back({fmt::format("{} #{}", data.record.name, id), &columns.x, &columns.y, line_colour, 1.0f, false,
                            columns.version});
      if (!markers_) continue;
      if (!data.record.growth_method.empty() && !columns.x.empty()) {
        // A run grown from another: its curve starts where the growth happened.
        const RunRecord* parent = app.run(data.record.parent);
        plot.markers.push_back({columns.x.front(), (line_colour & 0x00FFFFFF) | 0xB0000000,
                                fmt::format("{} grown from {} with {}", data.record.name,
                                            parent ? parent->name : "?", data.record.growth_method)});
      }
      for (const EventRow& event : data.events) {
        if (event.kind != "growth") continue;
        PlotMarker marker;
        marker.x = x_at_step(*series, columns.x, static_cast<double>(event.step));
        marker.colour = (line_colour & 0x00FFFFFF) | 0xB0000000;
        marker.label = fmt::format("{}: growth at step {}\n{}", data.record.name, event.step, event.payload);
        plot.markers.push_back(marker);
      }
    }
    plot_draw(plot);
  }

 private:
  struct Columns {
    const Series* source = nullptr;
    std::size_t size = 0;
    std::uint64_t version = 0;
    int axis = -1;
    float smoothing = -1;
    std::vector<double> x, y;
  };

  Columns& columns_for(const RunData& data, const Series& series) {
    Columns& c = cache_[{data.record.id, metric_}];
    if (c.source != &series || c.size != series.value.size() || c.axis != axis_ || c.smoothing != smoothing_) {
      c.source = &series;
      c.size = series.value.size();
      ++c.version;
      c.axis = axis_;
      c.smoothing = smoothing_;
      c.x = x_column(series, axis_, std::max(0.0, data.record.inherited_flops));
      c.y = ema(series.value, smoothing_);
    }
    return c;
  }

  void controls(App& app) {
    std::set<std::string> keys = {metric_};
    for (std::int64_t id : app.selected) {
      auto found = app.snapshot->data.find(id);
      if (found == app.snapshot->data.end()) continue;
      for (const auto& item : found->second->metrics) keys.insert(item.first);
    }
    ImGui::SetNextItemWidth(180);
    if (ImGui::BeginCombo("metric", metric_.c_str())) {
      for (const std::string& key : keys) {
        if (ImGui::Selectable(key.c_str(), key == metric_)) metric_ = key;
      }
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(170);
    ImGui::Combo("x axis", &axis_, kAxisLabels, IM_ARRAYSIZE(kAxisLabels));
    help_marker("cumulative FLOPs adds the compute a grown run inherited from its ancestors, so a growth ladder "
                "reads left to right as one budget (the paper's Fig. 3 axis).");
    ImGui::SameLine();
    ImGui::Checkbox("log x", &log_x_);
    ImGui::SameLine();
    ImGui::Checkbox("log y", &log_y_);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(140);
    ImGui::SliderFloat("smoothing", &smoothing_, 0.0f, 0.99f, "%.2f");
    ImGui::SameLine();
    ImGui::Checkbox("growth events", &markers_);
    // The mouse controls, in full where the toolbar leaves room, else behind a (?) (at 1000
    // pixels wide the line was cut to "whe…").
    const char* controls = "wheel: zoom x (shift: y) · drag: pan · double-click: fit · legend: toggle";
    ImGui::SameLine();
    if (ImGui::CalcTextSize(controls).x < ImGui::GetContentRegionAvail().x) {
      ImGui::TextDisabled("%s", controls);
    } else {
      ImGui::TextDisabled("(?)");
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", controls);
    }
  }

  bool initialised_ = false;
  std::string metric_ = "train/loss";
  int axis_ = 1;
  bool log_x_ = false, log_y_ = false, markers_ = true;
  float smoothing_ = 0;
  std::map<std::pair<std::int64_t, std::string>, Columns> cache_;
};

}  // namespace

std::unique_ptr<Panel> make_curves_panel() { return std::make_unique<CurvesPanel>(); }

}  // namespace tfw::gui
