// See plot.h.
#include "workbench/gui/plot.h"

#include "workbench/colormap.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace tfw::gui {

namespace {

// Per-plot interaction state, keyed by Plot::id.
// The downsampled indices of one line, reused while its data and the x range are unchanged
// (the cost of a frame is then the drawing, not a pass over every point).
struct Decimated {
  const std::vector<double>* x = nullptr;
  std::size_t size = 0;
  std::uint64_t version = 0;
  double lo = 0, hi = 0;
  int columns = 0;
  bool log = false;
  std::vector<std::size_t> indices;
};

struct PlotView {
  std::map<std::string, Decimated> decimated;  // by line label
  std::vector<std::tuple<const void*, std::size_t, std::uint64_t>> fitted;  // the data the fitted axes came from
  bool user = false;  // zoomed or panned: keep the view instead of fitting the data
  AxisMap x, y;
  bool log_x = false, log_y = false;
  std::set<std::string> hidden;
};

std::map<std::string, PlotView>& views() {
  static std::map<std::string, PlotView> all;
  return all;
}

constexpr float kLeft = 66, kBottom = 40, kTop = 10, kRight = 14;

}  // namespace

ImU32 series_colour(std::size_t k) {
  const Rgb c = series_rgb(k);
  return IM_COL32(c.r, c.g, c.b, 255);
}

int plot_draw(const Plot& plot, ImVec2 size) {
  ImVec2 avail = ImGui::GetContentRegionAvail();
  if (size.x <= 0) size.x = std::max(avail.x, 200.0f);
  if (size.y <= 0) size.y = std::max(avail.y, 150.0f);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::PushID(plot.id.c_str());
  ImGui::InvisibleButton("canvas", size, ImGuiButtonFlags_MouseButtonLeft);
  const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 lo(origin.x + kLeft, origin.y + kTop), hi(origin.x + size.x - kRight, origin.y + size.y - kBottom);
  const float width = hi.x - lo.x, height = hi.y - lo.y;
  draw->AddRectFilled(lo, hi, IM_COL32(22, 24, 28, 255));

  PlotView& view = views()[plot.id];
  if (view.log_x != plot.log_x || view.log_y != plot.log_y) {
    view.user = false;
    view.fitted.clear();
    view.log_x = plot.log_x;
    view.log_y = plot.log_y;
  }
  auto visible = [&](const PlotLine& line) { return line.x && line.y && !view.hidden.count(line.label); };
  std::vector<std::tuple<const void*, std::size_t, std::uint64_t>> signature;
  for (const PlotLine& line : plot.lines) {
    if (visible(line)) signature.emplace_back(line.y, line.y->size(), line.version);
  }
  signature.emplace_back(nullptr, static_cast<std::size_t>(width * 4096 + height), 0);
  if (!view.user && signature != view.fitted) {
    view.fitted = signature;
    std::vector<const std::vector<double>*> xs, ys;
    for (const PlotLine& line : plot.lines) {
      if (!visible(line)) continue;
      xs.push_back(line.x);
      ys.push_back(line.y);
    }
    AxisMap x, y;
    const bool fit_x = axis_fit(xs, plot.log_x, 0.0, x), fit_y = axis_fit(ys, plot.log_y, 0.05, y);
    if (!fit_x || !fit_y || width < 20 || height < 20) {
      draw->AddRect(lo, hi, IM_COL32(90, 90, 90, 255));
      const ImVec2 text = ImGui::CalcTextSize(plot.empty_text.c_str());
      draw->AddText(ImVec2((lo.x + hi.x - text.x) / 2, (lo.y + hi.y - text.y) / 2), IM_COL32(160, 160, 160, 255),
                    plot.empty_text.c_str());
      // The legend still lets hidden lines come back.
      view.x = x;
      view.y = y;
    } else {
      view.x = x;
      view.y = y;
    }
  }
  const AxisMap ax = view.x, ay = view.y;
  const double sx = width / (ax.hi - ax.lo), sy = height / (ay.hi - ay.lo);
  auto to_screen = [&](double x, double y) {
    return ImVec2(static_cast<float>(lo.x + (ax.forward(x) - ax.lo) * sx),
                  static_cast<float>(hi.y - (ay.forward(y) - ay.lo) * sy));
  };

  // Interaction: wheel zooms x around the cursor (shift: y), drag pans, double-click fits.
  ImGuiIO& io = ImGui::GetIO();
  if (hovered && io.MouseWheel != 0) {
    const double factor = std::pow(0.85, io.MouseWheel);
    AxisMap& axis = io.KeyShift ? view.y : view.x;
    const double at = io.KeyShift ? ay.lo + (hi.y - io.MousePos.y) / sy : ax.lo + (io.MousePos.x - lo.x) / sx;
    axis.lo = at + (axis.lo - at) * factor;
    axis.hi = at + (axis.hi - at) * factor;
    view.user = true;
  }
  if (active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f)) {
    const double dx = io.MouseDelta.x / sx, dy = io.MouseDelta.y / sy;
    view.x.lo -= dx, view.x.hi -= dx;
    view.y.lo += dy, view.y.hi += dy;
    view.user = true;
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    view.user = false;
    view.fitted.clear();
  }

  // Grid and ticks.
  const ImU32 grid = IM_COL32(60, 64, 72, 255), text = IM_COL32(200, 200, 200, 255);
  for (const Tick& tick : axis_ticks(ax, std::max(2, static_cast<int>(width / 110)))) {
    const float x = to_screen(tick.value, ay.inverse(ay.lo)).x;
    if (x < lo.x - 0.5f || x > hi.x + 0.5f) continue;
    draw->AddLine(ImVec2(x, lo.y), ImVec2(x, hi.y), tick.major ? grid : IM_COL32(44, 47, 54, 255));
    if (!tick.major && ax.log) continue;
    const ImVec2 extent = ImGui::CalcTextSize(tick.label.c_str());
    // Centred on its tick, but kept inside the widget (the last tick sits on the right edge).
    const float left = std::clamp(x - extent.x / 2, origin.x, origin.x + size.x - extent.x);
    draw->AddText(ImVec2(left, hi.y + 3), text, tick.label.c_str());
  }
  for (const Tick& tick : axis_ticks(ay, std::max(2, static_cast<int>(height / 40)))) {
    const float y = to_screen(ax.inverse(ax.lo), tick.value).y;
    if (y < lo.y - 0.5f || y > hi.y + 0.5f) continue;
    draw->AddLine(ImVec2(lo.x, y), ImVec2(hi.x, y), tick.major ? grid : IM_COL32(44, 47, 54, 255));
    const ImVec2 extent = ImGui::CalcTextSize(tick.label.c_str());
    draw->AddText(ImVec2(lo.x - extent.x - 4, y - extent.y / 2), text, tick.label.c_str());
  }
  draw->AddRect(lo, hi, IM_COL32(90, 90, 90, 255));
  {
    const std::string x_label = plot.x_label + (plot.log_x ? " (log)" : "");
    const ImVec2 extent = ImGui::CalcTextSize(x_label.c_str());
    draw->AddText(ImVec2((lo.x + hi.x - extent.x) / 2, hi.y + 20), text, x_label.c_str());
    const std::string y_label = plot.y_label + (plot.log_y ? " (log)" : "");
    draw->AddText(ImVec2(origin.x + 2, origin.y - 2 + 0), text, y_label.c_str());
  }

  // Lines, points and markers, clipped to the plot area.
  draw->PushClipRect(lo, hi, true);
  std::vector<ImVec2> path;
  for (const PlotLine& line : plot.lines) {
    if (!visible(line)) continue;
    const std::vector<double>& xs = *line.x;
    const std::vector<double>& ys = *line.y;
    if (line.points) {
      for (std::size_t i = 0; i < std::min(xs.size(), ys.size()); ++i) {
        const ImVec2 p = to_screen(xs[i], ys[i]);
        if (std::isfinite(p.x) && std::isfinite(p.y)) draw->AddCircleFilled(p, 3.5f, line.colour);
      }
      continue;
    }
    path.clear();
    auto flush = [&] {
      if (path.size() >= 2) draw->AddPolyline(path.data(), static_cast<int>(path.size()), line.colour, 0, line.thickness);
      path.clear();
    };
    Decimated& cached = view.decimated[line.label];
    const double x_lo = ax.inverse(ax.lo), x_hi = ax.inverse(ax.hi);
    const int columns = static_cast<int>(width);
    if (cached.x != &xs || cached.size != xs.size() || cached.version != line.version || cached.lo != x_lo ||
        cached.hi != x_hi || cached.columns != columns || cached.log != ax.log) {
      cached = {&xs, xs.size(), line.version, x_lo, x_hi, columns, ax.log,
                downsample_minmax(xs, ys, x_lo, x_hi, ax.log, columns)};
    }
    for (std::size_t i : cached.indices) {
      const ImVec2 p = to_screen(xs[i], ys[i]);
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) {
        flush();
        continue;
      }
      path.push_back(p);
    }
    flush();
  }
  int hovered_marker = -1;
  for (std::size_t m = 0; m < plot.markers.size(); ++m) {
    const float x = to_screen(plot.markers[m].x, ay.inverse(ay.lo)).x;
    if (!std::isfinite(x)) continue;
    for (float y = lo.y; y < hi.y; y += 8) draw->AddLine(ImVec2(x, y), ImVec2(x, std::min(y + 4, hi.y)), plot.markers[m].colour, 1.5f);
    draw->AddTriangleFilled(ImVec2(x - 5, lo.y), ImVec2(x + 5, lo.y), ImVec2(x, lo.y + 8), plot.markers[m].colour);
    if (hovered && std::abs(io.MousePos.x - x) < 4) hovered_marker = static_cast<int>(m);
  }

  // Hover: the nearest point of any visible line.
  int hovered_line = -1;
  if (hovered && !active) {
    double best = 1e300;
    std::ptrdiff_t best_index = -1;
    const double px = io.MousePos.x - lo.x, py = hi.y - io.MousePos.y;
    for (std::size_t k = 0; k < plot.lines.size(); ++k) {
      const PlotLine& line = plot.lines[k];
      if (!visible(line)) continue;
      const std::ptrdiff_t i = nearest_point(*line.x, *line.y, ax, ay, sx, sy, px, py, 12.0);
      if (i < 0) continue;
      const ImVec2 p = to_screen((*line.x)[i], (*line.y)[i]);
      const double d = std::hypot(p.x - io.MousePos.x, p.y - io.MousePos.y);
      if (d < best) {
        best = d;
        best_index = i;
        hovered_line = static_cast<int>(k);
      }
    }
    if (hovered_line >= 0) {
      const PlotLine& line = plot.lines[hovered_line];
      const double x = (*line.x)[best_index], y = (*line.y)[best_index];
      draw->AddCircle(to_screen(x, y), 5.0f, IM_COL32_WHITE, 12, 2.0f);
      ImGui::SetTooltip("%s\n%s: %s\n%s: %s", line.label.c_str(), plot.x_label.c_str(), tick_label(x).c_str(),
                        plot.y_label.c_str(), fmt::format("{:.6g}", y).c_str());
    } else if (hovered_marker >= 0 && !plot.markers[hovered_marker].label.empty()) {
      ImGui::SetTooltip("%s", plot.markers[hovered_marker].label.c_str());
    }
  }
  draw->PopClipRect();

  // Legend (in the corner that hides the least data): click an entry to hide or show its line.
  float legend_width = 0;
  int entries = 0;
  for (const PlotLine& line : plot.lines) {
    if (line.label.empty()) continue;
    legend_width = std::max(legend_width, ImGui::CalcTextSize(line.label.c_str()).x);
    ++entries;
  }
  if (entries > 0) {
    const float row = ImGui::GetTextLineHeight() + 2;
    const float box_w = legend_width + 28, box_h = 4 + row * static_cast<float>(entries);
    // In the corner where it hides the least data (a sample of each visible line's points).
    std::vector<std::pair<double, double>> sample;
    for (const PlotLine& line : plot.lines) {
      if (!visible(line)) continue;
      const std::size_t n = std::min(line.x->size(), line.y->size());
      const std::size_t stride = std::max<std::size_t>(1, n / 2000);
      for (std::size_t i = 0; i < n; i += stride) {
        const double ux = (ax.forward((*line.x)[i]) - ax.lo) / (ax.hi - ax.lo);
        const double uy = (ay.forward((*line.y)[i]) - ay.lo) / (ay.hi - ay.lo);
        if (ux >= 0 && ux <= 1 && uy >= 0 && uy <= 1) sample.emplace_back(ux, uy);
      }
    }
    const int corner = least_covered_corner(sample, (box_w + 12) / width, (box_h + 12) / height);
    const float left = corner % 2 == 1 ? lo.x + 6 : hi.x - 6 - box_w;
    const float top = corner < 2 ? lo.y + 6 : hi.y - 6 - box_h;
    const ImVec2 box_lo(left, top);
    const ImVec2 box_hi(left + box_w, top + box_h);
    draw->AddRectFilled(box_lo, box_hi, IM_COL32(30, 32, 38, 220));
    draw->AddRect(box_lo, box_hi, IM_COL32(90, 90, 90, 255));
    float y = box_lo.y + 3;
    for (const PlotLine& line : plot.lines) {
      if (line.label.empty()) continue;
      const bool shown = !view.hidden.count(line.label);
      const ImVec2 swatch(box_lo.x + 6, y + row / 2 - 5);
      if (shown) draw->AddRectFilled(swatch, ImVec2(swatch.x + 14, swatch.y + 10), line.colour);
      else draw->AddRect(swatch, ImVec2(swatch.x + 14, swatch.y + 10), line.colour);
      draw->AddText(ImVec2(box_lo.x + 26, y), shown ? text : IM_COL32(120, 120, 120, 255), line.label.c_str());
      if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && io.MousePos.x >= box_lo.x &&
          io.MousePos.x <= box_hi.x && io.MousePos.y >= y && io.MousePos.y < y + row) {
        if (shown) view.hidden.insert(line.label);
        else view.hidden.erase(line.label);
      }
      y += row;
    }
  }
  ImGui::PopID();
  return hovered_line;
}

}  // namespace tfw::gui
