// Loss curves: the selected runs overlaid; x axis steps, tokens, training FLOPs, cumulative
// FLOPs (the lineage's budget: a grown run starts where its parent's compute ended) or wall
// time; linear or log axes; EMA smoothing; legend toggles; hover read-out; growth events
// marked; zoom and pan (plot.h). Runs that differ only in seed (results::group_by_seed) are
// drawn as one line, their mean, over the band between their minimum and maximum, each group
// toggled back to its seeds from the toolbar. Derived columns and bands are cached per series,
// so a frame costs only the drawing.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "workbench/gui/app.h"
#include "workbench/gui/plot.h"
#include "workbench/results/figures.h"
#include "workbench/results/results.h"

namespace tfw::gui {

namespace {

const char* kAxes[] = {"steps", "tokens", "cumulative_tokens", "flops", "cumulative_flops", "wall"};
const char* kAxisLabels[] = {"step",           "tokens",           "cumulative tokens",
                             "training FLOPs", "cumulative FLOPs", "wall time (s)"};
constexpr int kCumulativeTokens = 2, kCumulativeFlops = 4;

std::vector<double> plus(std::vector<double> x, double offset) {
  for (double& v : x) v += offset;
  return x;
}

// The x column of a series for axis k; `inherited`: what the lineage saw before the run, in
// the axis's unit (tokens or FLOPs; 0 for the other axes).
std::vector<double> x_column(const Series& s, int k, double inherited) {
  switch (k) {
    case 0: return s.step;
    case 1: return s.tokens;
    case kCumulativeTokens: return plus(s.tokens, inherited);
    case 3: return s.flops;
    case kCumulativeFlops: return plus(s.flops, inherited);
    default: return s.wall;
  }
}

// x of the run at `step` (a growth event inside it): between its points by interpolation,
// and outside them along its first or last segment.
double x_at_step(const Series& s, const std::vector<double>& x, double step) {
  return interpolate(s.step, x, step, Outside::extend);
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
      each_seed_all_ = app.options.each_seed;
      initialised_ = true;
    }
    if (app.selected.empty()) {
      empty_state("No runs selected",
                  "Tick runs in the Runs tab (or pass --select ID,... to `tfw gui`) to overlay "
                  "their curves here.");
      return;
    }
    seed_groups(app);
    controls(app);
    Plot plot;
    plot.id = "curves";
    plot.x_label = kAxisLabels[axis_];
    plot.y_label = metric_;
    plot.log_x = log_x_;
    plot.log_y = log_y_;
    plot.empty_text = fmt::format("no '{}' points in the selected runs yet", metric_);
    const std::vector<SeedGroup>& groups = seed_groups(app);
    const std::vector<std::size_t> colours = line_colours(app, groups);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const SeedGroup& group = groups[g];
      if (group.ids.size() >= 2 && !each_seed_.count(group.label)) {
        add_group(app, group, series_colour(colours[g]), plot);
        continue;
      }
      // A group drawn seed by seed: each run in its own colour, from the group's on.
      for (std::size_t k = 0; k < group.ids.size(); ++k)
        add_run(app, group.ids[k], series_colour(colours[g] + k), plot);
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
    double inherited = 0;
    std::vector<double> x, y;
  };
  // Selected runs that differ only in seed, in the order of their first run.
  struct SeedGroup {
    std::string label;  // "baseline (3 seeds)"
    std::vector<std::int64_t> ids;
  };
  // A group's mean and band, with the columns (run, version, size) they were computed from.
  struct Band {
    std::vector<std::tuple<std::int64_t, std::uint64_t, std::size_t>> from;
    std::uint64_t version = 0;
    SeedBand band;
  };

  // The first colour of each group's lines. A grown lineage reads as one line: a group drawn as
  // one line whose runs were grown from another such group, the only group grown from it,
  // continues its colour (the growth markers tell the stages apart); every other line takes the
  // palette's next colour, and a group drawn seed by seed one colour a run.
  std::vector<std::size_t> line_colours(App& app, const std::vector<SeedGroup>& groups) const {
    std::map<std::int64_t, std::size_t> group_of;  // run id -> group
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::int64_t id : groups[g].ids) group_of[id] = g;
    }
    std::vector<long> parent(groups.size(), -1);
    std::vector<std::size_t> width(groups.size(), 1);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (groups[g].ids.size() >= 2 && each_seed_.count(groups[g].label)) width[g] = groups[g].ids.size();
      const RunRecord* record = app.run(groups[g].ids.front());
      if (record != nullptr && record->parent != 0 && group_of.count(record->parent))
        parent[g] = static_cast<long>(group_of[record->parent]);
    }
    return results::lineage_colour_indices(parent, width);
  }

  // The selected runs grouped by seed, regrouped when the selection changes.
  const std::vector<SeedGroup>& seed_groups(App& app) {
    std::vector<std::int64_t> ids(app.selected.begin(), app.selected.end());
    if (ids == grouped_ids_) return groups_;
    grouped_ids_ = ids;
    groups_.clear();
    std::vector<RunRecord> records;
    for (std::int64_t id : ids) {
      if (const RunRecord* record = app.run(id)) records.push_back(*record);
    }
    for (const results::SeedGroup& group : results::group_by_seed(records)) {
      SeedGroup g;
      for (const RunRecord* r : group.runs) g.ids.push_back(r->id);
      g.label = g.ids.size() >= 2 ? fmt::format("{} ({} seeds)", group.label, g.ids.size())
                                  : fmt::format("{} #{}", group.runs.front()->name, g.ids.front());
      if (each_seed_all_ && g.ids.size() >= 2) each_seed_.insert(g.label);  // --each-seed
      groups_.push_back(std::move(g));
    }
    return groups_;
  }

  // A group as one line: the mean of its runs where all of them have a value, over their
  // min–max band. Growth markers come from its first run (the seeds grow at the same step).
  void add_group(App& app, const SeedGroup& group, ImU32 colour, Plot& plot) {
    std::vector<XY> runs;
    std::vector<std::tuple<std::int64_t, std::uint64_t, std::size_t>> from;
    const RunData* first = nullptr;
    const Columns* first_columns = nullptr;
    for (std::int64_t id : group.ids) {
      auto found = app.snapshot->data.find(id);
      if (found == app.snapshot->data.end()) continue;
      const Series* series = found->second->series(metric_);
      if (!series) continue;
      Columns& columns = columns_for(app, *found->second, *series);
      runs.push_back({&columns.x, &columns.y});
      from.emplace_back(id, columns.version, columns.x.size());
      if (!first) first = found->second.get(), first_columns = &columns;
    }
    if (runs.empty()) return;
    Band& band = bands_[{group.label, metric_}];
    if (band.from != from) {
      band.from = from;
      ++band.version;
      band.band = seed_band(runs);
    }
    plot.lines.push_back({group.label, &band.band.x, &band.band.mean, colour, 2.0f, false, band.version, &band.band.low,
                          &band.band.high});
    if (markers_) add_markers(app, *first, *first->series(metric_), *first_columns, colour, plot);
  }

  void add_run(App& app, std::int64_t id, ImU32 colour, Plot& plot) {
    auto found = app.snapshot->data.find(id);
    if (found == app.snapshot->data.end()) return;
    const RunData& data = *found->second;
    const Series* series = data.series(metric_);
    if (!series) return;
    Columns& columns = columns_for(app, data, *series);
    plot.lines.push_back(
        {fmt::format("{} #{}", data.record.name, id), &columns.x, &columns.y, colour, 1.0f, false, columns.version});
    if (markers_) add_markers(app, data, *series, columns, colour, plot);
  }

  // Where the run was grown from its parent, and its growth events.
  void add_markers(App& app, const RunData& data, const Series& series, const Columns& columns, ImU32 line_colour,
                   Plot& plot) {
    if (!data.record.growth_method.empty() && !columns.x.empty()) {
      // A run grown from another starts where the growth happened: at its step 0, with no
      // tokens, FLOPs or time of its own yet, so on this axis at what its lineage saw before it
      // (the cumulative axes) or at 0. Its first training point is a step later. A log axis
      // cannot show 0: there the marker stands on that first point.
      double start = columns.inherited;
      if (!std::isfinite(start) || (log_x_ && start <= 0)) start = columns.x.front();
      const RunRecord* parent = app.run(data.record.parent);
      plot.markers.push_back({start, (line_colour & 0x00FFFFFF) | 0xB0000000,
                              fmt::format("{} grown from {} with {}", data.record.name, parent ? parent->name : "?",
                                          data.record.growth_method)});
    }
    for (const EventRow& event : data.events) {
      if (event.kind != "growth") continue;
      PlotMarker marker;
      marker.x = x_at_step(series, columns.x, static_cast<double>(event.step));
      marker.colour = (line_colour & 0x00FFFFFF) | 0xB0000000;
      marker.label = fmt::format("{}: growth at step {}\n{}", data.record.name, event.step, event.payload);
      plot.markers.push_back(marker);
    }
  }

  Columns& columns_for(const App& app, const RunData& data, const Series& series) {
    // The lineage before the run: its inherited tokens can change as its ancestors' points arrive.
    double inherited = 0;
    if (axis_ == kCumulativeFlops) inherited = std::max(0.0, data.record.inherited_flops);
    if (axis_ == kCumulativeTokens) inherited = inherited_tokens(*app.snapshot, data.record);
    Columns& c = cache_[{data.record.id, metric_}];
    if (c.source != &series || c.size != series.value.size() || c.axis != axis_ || c.smoothing != smoothing_ ||
        !(c.inherited == inherited || (std::isnan(c.inherited) && std::isnan(inherited)))) {
      c.source = &series;
      c.size = series.value.size();
      ++c.version;
      c.axis = axis_;
      c.smoothing = smoothing_;
      c.inherited = inherited;
      c.x = x_column(series, axis_, inherited);
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
    ImGui::SetNextItemWidth(160);
    if (ImGui::BeginCombo("metric", metric_.c_str())) {
      for (const std::string& key : keys) {
        if (ImGui::Selectable(key.c_str(), key == metric_)) metric_ = key;
      }
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(150);
    ImGui::Combo("x axis", &axis_, kAxisLabels, IM_ARRAYSIZE(kAxisLabels));
    help_marker(
        "cumulative FLOPs adds the compute a grown run inherited from its ancestors, so a growth ladder "
        "reads left to right as one budget (the paper's Fig. 3 axis); cumulative tokens adds the tokens its "
        "ancestors trained on before it was grown.");
    ImGui::SameLine();
    ImGui::Checkbox("log x", &log_x_);
    ImGui::SameLine();
    ImGui::Checkbox("log y", &log_y_);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(100);
    ImGui::SliderFloat("smoothing", &smoothing_, 0.0f, 0.99f, "%.2f");
    ImGui::SameLine();
    ImGui::Checkbox("growth events", &markers_);
    seed_group_toggles();
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

  // "seeds": a popup with one toggle per seed group of two or more runs: its mean and band, or
  // each of its runs alone. Only there while the selection holds such a group.
  void seed_group_toggles() {
    std::vector<const SeedGroup*> groups;
    for (const SeedGroup& group : groups_) {
      if (group.ids.size() >= 2) groups.push_back(&group);
    }
    if (groups.empty()) return;
    ImGui::SameLine();
    if (ImGui::Button("seeds")) ImGui::OpenPopup("seed groups");
    if (ImGui::IsItemHovered()) {
      ImGui::SetTooltip(
          "Runs that differ only in seed are drawn as their mean over the band from their minimum to "
          "their maximum, where every seed has a value. Click to draw a group's runs one by one.");
    }
    if (ImGui::BeginPopup("seed groups")) {
      for (const SeedGroup* group : groups) {
        bool mean = !each_seed_.count(group->label);
        if (ImGui::Checkbox(fmt::format("{}: mean and min-max band", group->label).c_str(), &mean)) {
          if (mean)
            each_seed_.erase(group->label);
          else
            each_seed_.insert(group->label);
        }
      }
      ImGui::EndPopup();
    }
  }

  bool initialised_ = false;
  std::string metric_ = "train/loss";
  int axis_ = 1;
  bool log_x_ = false, log_y_ = false, markers_ = true;
  float smoothing_ = 0;
  std::map<std::pair<std::int64_t, std::string>, Columns> cache_;
  std::vector<std::int64_t> grouped_ids_;
  std::vector<SeedGroup> groups_;
  std::set<std::string> each_seed_;  // groups drawn run by run
  bool each_seed_all_ = false;
  std::map<std::pair<std::string, std::string>, Band> bands_;  // by group label and metric
};

}  // namespace

std::unique_ptr<Panel> make_curves_panel() { return std::make_unique<CurvesPanel>(); }

}  // namespace tfw::gui
