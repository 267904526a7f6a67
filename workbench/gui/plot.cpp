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
  std::map<std::string, Decimated> decimated;                               // by line label
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
constexpr ImU32 kBorder = IM_COL32(90, 90, 90, 255);
constexpr ImU32 kGrid = IM_COL32(60, 64, 72, 255), kMinorGrid = IM_COL32(44, 47, 54, 255);
constexpr ImU32 kText = IM_COL32(200, 200, 200, 255);

// One frame of one plot: the widget on screen, the plot area inside its margins, and the
// axes this frame is drawn with (a zoom or pan in this frame shows in the next).
struct Frame {
  ImDrawList* draw = nullptr;
  ImVec2 origin, size;  // the whole widget
  ImVec2 lo, hi;        // the plot area
  float width = 0, height = 0;
  bool hovered = false, active = false;
  AxisMap ax, ay;
  double sx = 0, sy = 0;  // pixels per axis unit

  void set_axes(const AxisMap& x, const AxisMap& y) {
    ax = x;
    ay = y;
    sx = width / (ax.hi - ax.lo);
    sy = height / (ay.hi - ay.lo);
  }
  ImVec2 to_screen(double x, double y) const {
    return ImVec2(static_cast<float>(lo.x + (ax.forward(x) - ax.lo) * sx),
                  static_cast<float>(hi.y - (ay.forward(y) - ay.lo) * sy));
  }
};

bool visible(const PlotView& view, const PlotLine& line) { return line.x && line.y && !view.hidden.count(line.label); }

// Claims the widget's area (a size of 0: the available space) and fills the plot area.
Frame place_canvas(ImVec2 size) {
  Frame f;
  ImVec2 avail = ImGui::GetContentRegionAvail();
  if (size.x <= 0) size.x = std::max(avail.x, 200.0f);
  if (size.y <= 0) size.y = std::max(avail.y, 150.0f);
  f.origin = ImGui::GetCursorScreenPos();
  f.size = size;
  ImGui::InvisibleButton("canvas", size, ImGuiButtonFlags_MouseButtonLeft);
  f.hovered = ImGui::IsItemHovered();
  f.active = ImGui::IsItemActive();
  f.draw = ImGui::GetWindowDrawList();
  f.lo = ImVec2(f.origin.x + kLeft, f.origin.y + kTop);
  f.hi = ImVec2(f.origin.x + size.x - kRight, f.origin.y + size.y - kBottom);
  f.width = f.hi.x - f.lo.x;
  f.height = f.hi.y - f.lo.y;
  f.draw->AddRectFilled(f.lo, f.hi, IM_COL32(22, 24, 28, 255));
  return f;
}

// The plot's view; switching an axis between linear and log fits the data again.
PlotView& view_of(const Plot& plot) {
  PlotView& view = views()[plot.id];
  if (view.log_x != plot.log_x || view.log_y != plot.log_y) {
    view.user = false;
    view.fitted.clear();
    view.log_x = plot.log_x;
    view.log_y = plot.log_y;
  }
  return view;
}

void draw_empty_text(const Frame& f, const std::string& empty_text) {
  f.draw->AddRect(f.lo, f.hi, kBorder);
  const ImVec2 text = ImGui::CalcTextSize(empty_text.c_str());
  f.draw->AddText(ImVec2((f.lo.x + f.hi.x - text.x) / 2, (f.lo.y + f.hi.y - text.y) / 2), IM_COL32(160, 160, 160, 255),
                  empty_text.c_str());
}

// Fits the view's axes to the visible lines, unless the user zoomed or panned or neither the
// data nor the plot area changed since the last fit. With nothing drawable, says so.
void fit_axes(const Plot& plot, PlotView& view, const Frame& f) {
  std::vector<std::tuple<const void*, std::size_t, std::uint64_t>> signature;
  for (const PlotLine& line : plot.lines) {
    if (visible(view, line)) signature.emplace_back(line.y, line.y->size(), line.version);
  }
  signature.emplace_back(nullptr, static_cast<std::size_t>(f.width * 4096 + f.height), 0);
  if (view.user || signature == view.fitted) return;
  view.fitted = signature;
  std::vector<const std::vector<double>*> xs, ys;
  for (const PlotLine& line : plot.lines) {
    if (!visible(view, line)) continue;
    xs.push_back(line.x);
    ys.push_back(line.y);
    if (line.band_low && line.band_high) ys.insert(ys.end(), {line.band_low, line.band_high});
  }
  // Markers are drawn too: a grown run's start (its step 0) lies left of its first point.
  std::vector<double> marker_x;
  for (const PlotMarker& m : plot.markers) marker_x.push_back(m.x);
  if (!xs.empty() && !marker_x.empty()) xs.push_back(&marker_x);
  AxisMap x, y;
  const bool fit_x = axis_fit(xs, plot.log_x, 0.0, x), fit_y = axis_fit(ys, plot.log_y, 0.05, y);
  if (!fit_x || !fit_y || f.width < 20 || f.height < 20) {
    draw_empty_text(f, plot.empty_text);
    // The legend still lets hidden lines come back.
  }
  view.x = x;
  view.y = y;
}

// Interaction: wheel zooms x around the cursor (shift: y), drag pans, double-click fits.
void interact(PlotView& view, const Frame& f) {
  ImGuiIO& io = ImGui::GetIO();
  if (f.hovered && io.MouseWheel != 0) {
    const double factor = std::pow(0.85, io.MouseWheel);
    AxisMap& axis = io.KeyShift ? view.y : view.x;
    const double at =
        io.KeyShift ? f.ay.lo + (f.hi.y - io.MousePos.y) / f.sy : f.ax.lo + (io.MousePos.x - f.lo.x) / f.sx;
    axis.lo = at + (axis.lo - at) * factor;
    axis.hi = at + (axis.hi - at) * factor;
    view.user = true;
  }
  if (f.active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 1.0f)) {
    const double dx = io.MouseDelta.x / f.sx, dy = io.MouseDelta.y / f.sy;
    view.x.lo -= dx, view.x.hi -= dx;
    view.y.lo += dy, view.y.hi += dy;
    view.user = true;
  }
  if (f.hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    view.user = false;
    view.fitted.clear();
  }
}

// Grid and ticks, the frame, and the axis labels.
void draw_axes(const Plot& plot, const Frame& f) {
  const AxisMap &ax = f.ax, &ay = f.ay;
  // A log axis of under three decades labels its 2 and 5 ticks too, as the exported figures do
  // (figures.cpp); any label that would overlap the one before it is left out.
  const bool x_minors = !ax.log || ax.hi - ax.lo < 3, y_minors = !ay.log || ay.hi - ay.lo < 3;
  float last_right = -1e9f;
  for (const Tick& tick : axis_ticks(ax, std::max(2, static_cast<int>(f.width / 110)))) {
    const float x = f.to_screen(tick.value, ay.inverse(ay.lo)).x;
    if (x < f.lo.x - 0.5f || x > f.hi.x + 0.5f) continue;
    f.draw->AddLine(ImVec2(x, f.lo.y), ImVec2(x, f.hi.y), tick.major ? kGrid : kMinorGrid);
    if (!tick.major && !x_minors) continue;
    const ImVec2 extent = ImGui::CalcTextSize(tick.label.c_str());
    // Centred on its tick, but kept inside the widget (the last tick sits on the right edge).
    const float left = std::clamp(x - extent.x / 2, f.origin.x, f.origin.x + f.size.x - extent.x);
    if (left < last_right + 6) continue;
    last_right = left + extent.x;
    f.draw->AddText(ImVec2(left, f.hi.y + 3), kText, tick.label.c_str());
  }
  float last_top = 1e9f;
  for (const Tick& tick : axis_ticks(ay, std::max(2, static_cast<int>(f.height / 40)))) {
    const float y = f.to_screen(ax.inverse(ax.lo), tick.value).y;
    if (y < f.lo.y - 0.5f || y > f.hi.y + 0.5f) continue;
    f.draw->AddLine(ImVec2(f.lo.x, y), ImVec2(f.hi.x, y), tick.major ? kGrid : kMinorGrid);
    if (!tick.major && !y_minors) continue;
    const ImVec2 extent = ImGui::CalcTextSize(tick.label.c_str());
    if (y + extent.y / 2 > last_top - 2) continue;  // ticks come bottom to top
    last_top = y - extent.y / 2;
    f.draw->AddText(ImVec2(f.lo.x - extent.x - 4, y - extent.y / 2), kText, tick.label.c_str());
  }
  f.draw->AddRect(f.lo, f.hi, kBorder);
  const std::string x_label = plot.x_label + (plot.log_x ? " (log)" : "");
  const ImVec2 extent = ImGui::CalcTextSize(x_label.c_str());
  f.draw->AddText(ImVec2((f.lo.x + f.hi.x - extent.x) / 2, f.hi.y + 20), kText, x_label.c_str());
  const std::string y_label = plot.y_label + (plot.log_y ? " (log)" : "");
  f.draw->AddText(ImVec2(f.origin.x + 2, f.origin.y - 2 + 0), kText, y_label.c_str());
}

void draw_points(const PlotLine& line, const Frame& f) {
  const std::vector<double>& xs = *line.x;
  const std::vector<double>& ys = *line.y;
  for (std::size_t i = 0; i < std::min(xs.size(), ys.size()); ++i) {
    const ImVec2 p = f.to_screen(xs[i], ys[i]);
    if (std::isfinite(p.x) && std::isfinite(p.y)) f.draw->AddCircleFilled(p, 3.5f, line.colour);
  }
}

// The line's points left after downsampling to the plot's pixel columns, recomputed only
// when the data, the x range or the width changed.
const std::vector<std::size_t>& decimated(Decimated& cached, const PlotLine& line, const Frame& f) {
  const std::vector<double>& xs = *line.x;
  const double x_lo = f.ax.inverse(f.ax.lo), x_hi = f.ax.inverse(f.ax.hi);
  const int columns = static_cast<int>(f.width);
  if (cached.x != &xs || cached.size != xs.size() || cached.version != line.version || cached.lo != x_lo ||
      cached.hi != x_hi || cached.columns != columns || cached.log != f.ax.log) {
    cached = {&xs,  xs.size(), line.version, x_lo,
              x_hi, columns,   f.ax.log,     downsample_minmax(xs, *line.y, x_lo, x_hi, f.ax.log, columns)};
  }
  return cached.indices;
}

// The line through the points at `indices`, broken where a point cannot be drawn; `path` is
// scratch. A point alone (a run with one evaluation, say) is drawn as a dot, as the exported
// figures draw it, instead of vanishing while its run stays in the legend.
void draw_polyline(const PlotLine& line, const std::vector<std::size_t>& indices, const Frame& f,
                   std::vector<ImVec2>& path) {
  path.clear();
  auto flush = [&] {
    if (path.size() >= 2)
      f.draw->AddPolyline(path.data(), static_cast<int>(path.size()), line.colour, 0, line.thickness);
    if (path.size() == 1) f.draw->AddCircleFilled(path.front(), line.thickness + 2.5f, line.colour);
    path.clear();
  };
  for (std::size_t i : indices) {
    const ImVec2 p = f.to_screen((*line.x)[i], (*line.y)[i]);
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) {
      flush();
      continue;
    }
    path.push_back(p);
  }
  flush();
}

// The band between band_low and band_high at the line's points (`indices`): one quad per
// segment, each a trapezoid between two x, so convex; skipped where a value cannot be drawn.
void draw_band(const PlotLine& line, const std::vector<std::size_t>& indices, const Frame& f) {
  const ImU32 fill = (line.colour & 0x00FFFFFF) | (IM_COL32(0, 0, 0, 56) & 0xFF000000);
  const std::vector<double>&x = *line.x, &low = *line.band_low, &high = *line.band_high;
  for (std::size_t k = 1; k < indices.size(); ++k) {
    const std::size_t a = indices[k - 1], b = indices[k];
    if (b >= low.size() || b >= high.size()) break;
    const ImVec2 quad[4] = {f.to_screen(x[a], low[a]), f.to_screen(x[a], high[a]), f.to_screen(x[b], high[b]),
                            f.to_screen(x[b], low[b])};
    bool finite = true;
    for (const ImVec2& p : quad) finite = finite && std::isfinite(p.x) && std::isfinite(p.y);
    if (finite) f.draw->AddConvexPolyFilled(quad, 4, fill);
  }
}

void draw_lines(const Plot& plot, PlotView& view, const Frame& f) {
  std::vector<ImVec2> path;
  for (const PlotLine& line : plot.lines) {  // bands first, so that no band covers a line
    if (!visible(view, line) || line.points || !line.band_low || !line.band_high) continue;
    draw_band(line, decimated(view.decimated[line.label], line, f), f);
  }
  for (const PlotLine& line : plot.lines) {
    if (!visible(view, line)) continue;
    if (line.points)
      draw_points(line, f);
    else
      draw_polyline(line, decimated(view.decimated[line.label], line, f), f, path);
  }
}

// Dashed vertical markers with a tab at the top. Returns the hovered marker, or -1.
int draw_markers(const Plot& plot, const Frame& f) {
  const ImGuiIO& io = ImGui::GetIO();
  int hovered_marker = -1;
  for (std::size_t m = 0; m < plot.markers.size(); ++m) {
    const float x = f.to_screen(plot.markers[m].x, f.ay.inverse(f.ay.lo)).x;
    if (!std::isfinite(x)) continue;
    for (float y = f.lo.y; y < f.hi.y; y += 8) {
      f.draw->AddLine(ImVec2(x, y), ImVec2(x, std::min(y + 4, f.hi.y)), plot.markers[m].colour, 1.5f);
    }
    f.draw->AddTriangleFilled(ImVec2(x - 5, f.lo.y), ImVec2(x + 5, f.lo.y), ImVec2(x, f.lo.y + 8),
                              plot.markers[m].colour);
    if (f.hovered && std::abs(io.MousePos.x - x) < 4) hovered_marker = static_cast<int>(m);
  }
  return hovered_marker;
}

struct NearestPoint {
  int line = -1;  // in plot.lines; -1: none within reach
  std::ptrdiff_t index = -1;
};

// The nearest point to the mouse of any visible line.
NearestPoint nearest_to_mouse(const Plot& plot, const PlotView& view, const Frame& f) {
  const ImGuiIO& io = ImGui::GetIO();
  NearestPoint nearest;
  double best = 1e300;
  const double px = io.MousePos.x - f.lo.x, py = f.hi.y - io.MousePos.y;
  for (std::size_t k = 0; k < plot.lines.size(); ++k) {
    const PlotLine& line = plot.lines[k];
    if (!visible(view, line)) continue;
    const std::ptrdiff_t i = nearest_point(*line.x, *line.y, f.ax, f.ay, f.sx, f.sy, px, py, 12.0);
    if (i < 0) continue;
    const ImVec2 p = f.to_screen((*line.x)[i], (*line.y)[i]);
    const double d = std::hypot(p.x - io.MousePos.x, p.y - io.MousePos.y);
    if (d < best) {
      best = d;
      nearest = {static_cast<int>(k), i};
    }
  }
  return nearest;
}

// Hover: the nearest point of any visible line (ringed, with its values), else a marker's
// label. Returns the hovered line, or -1.
int hover_readout(const Plot& plot, const PlotView& view, const Frame& f, int hovered_marker) {
  if (!f.hovered || f.active) return -1;
  const NearestPoint nearest = nearest_to_mouse(plot, view, f);
  if (nearest.line >= 0) {
    const PlotLine& line = plot.lines[nearest.line];
    const double x = (*line.x)[nearest.index], y = (*line.y)[nearest.index];
    f.draw->AddCircle(f.to_screen(x, y), 5.0f, IM_COL32_WHITE, 12, 2.0f);
    ImGui::SetTooltip("%s\n%s: %s\n%s: %s", line.label.c_str(), plot.x_label.c_str(), tick_label(x).c_str(),
                      plot.y_label.c_str(), fmt::format("{:.6g}", y).c_str());
  } else if (hovered_marker >= 0 && !plot.markers[hovered_marker].label.empty()) {
    ImGui::SetTooltip("%s", plot.markers[hovered_marker].label.c_str());
  }
  return nearest.line;
}

// The top left of a legend box of box_w × box_h pixels.
ImVec2 legend_position(const Plot& plot, const PlotView& view, const Frame& f, float box_w, float box_h) {
  // In the corner where it hides the least data (a sample of each visible line's points).
  std::vector<std::pair<double, double>> sample;
  for (const PlotLine& line : plot.lines) {
    if (!visible(view, line)) continue;
    const std::size_t n = std::min(line.x->size(), line.y->size());
    const std::size_t stride = std::max<std::size_t>(1, n / 2000);
    for (std::size_t i = 0; i < n; i += stride) {
      const double ux = f.ax.unit((*line.x)[i]), uy = f.ay.unit((*line.y)[i]);
      if (ux >= 0 && ux <= 1 && uy >= 0 && uy <= 1) sample.emplace_back(ux, uy);
    }
  }
  const int corner = least_covered_corner(sample, (box_w + 12) / f.width, (box_h + 12) / f.height);
  const float left = corner % 2 == 1 ? f.lo.x + 6 : f.hi.x - 6 - box_w;
  const float top = corner < 2 ? f.lo.y + 6 : f.hi.y - 6 - box_h;
  return ImVec2(left, top);
}

// Legend (in the corner that hides the least data): click an entry to hide or show its line.
void draw_legend(const Plot& plot, PlotView& view, const Frame& f) {
  float legend_width = 0;
  int entries = 0;
  for (const PlotLine& line : plot.lines) {
    if (line.label.empty()) continue;
    legend_width = std::max(legend_width, ImGui::CalcTextSize(line.label.c_str()).x);
    ++entries;
  }
  if (entries == 0) return;
  const float row = ImGui::GetTextLineHeight() + 2;
  const float box_w = legend_width + 28, box_h = 4 + row * static_cast<float>(entries);
  const ImVec2 box_lo = legend_position(plot, view, f, box_w, box_h);
  const ImVec2 box_hi(box_lo.x + box_w, box_lo.y + box_h);
  f.draw->AddRectFilled(box_lo, box_hi, IM_COL32(30, 32, 38, 220));
  f.draw->AddRect(box_lo, box_hi, kBorder);
  const ImGuiIO& io = ImGui::GetIO();
  float y = box_lo.y + 3;
  for (const PlotLine& line : plot.lines) {
    if (line.label.empty()) continue;
    const bool shown = !view.hidden.count(line.label);
    const ImVec2 swatch(box_lo.x + 6, y + row / 2 - 5);
    if (shown)
      f.draw->AddRectFilled(swatch, ImVec2(swatch.x + 14, swatch.y + 10), line.colour);
    else
      f.draw->AddRect(swatch, ImVec2(swatch.x + 14, swatch.y + 10), line.colour);
    f.draw->AddText(ImVec2(box_lo.x + 26, y), shown ? kText : IM_COL32(120, 120, 120, 255), line.label.c_str());
    if (f.hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && io.MousePos.x >= box_lo.x &&
        io.MousePos.x <= box_hi.x && io.MousePos.y >= y && io.MousePos.y < y + row) {
      if (shown)
        view.hidden.insert(line.label);
      else
        view.hidden.erase(line.label);
    }
    y += row;
  }
}

}  // namespace

ImU32 series_colour(std::size_t k) {
  const Rgb c = series_rgb(k);
  return IM_COL32(c.r, c.g, c.b, 255);
}

int plot_draw(const Plot& plot, ImVec2 size) {
  ImGui::PushID(plot.id.c_str());
  Frame frame = place_canvas(size);
  PlotView& view = view_of(plot);
  fit_axes(plot, view, frame);
  frame.set_axes(view.x, view.y);
  interact(view, frame);
  draw_axes(plot, frame);

  // Lines, points and markers, clipped to the plot area.
  frame.draw->PushClipRect(frame.lo, frame.hi, true);
  draw_lines(plot, view, frame);
  const int hovered_marker = draw_markers(plot, frame);
  const int hovered_line = hover_readout(plot, view, frame, hovered_marker);
  frame.draw->PopClipRect();

  draw_legend(plot, view, frame);
  ImGui::PopID();
  return hovered_line;
}

}  // namespace tfw::gui
