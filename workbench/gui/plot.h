// Our plot widget on ImDrawList (Debian's ImGui 1.86 has no ImPlot): lines and points on
// linear or log axes, tick labels, a legend whose entries toggle their line, vertical
// markers (growth events), translucent bands (a seed group's min–max), a hover read-out of the nearest point, wheel
// zoom, drag pan and double-click reset. Long lines are min/max-downsampled to the pixel columns they cover, so a
// million points across lines stay interactive. Used by the curves and FLOPs panels and the schedule designer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <imgui.h>

#include "workbench/common/plot_math.h"

namespace tfw::gui {

struct PlotLine {
  std::string label;
  const std::vector<double>* x = nullptr;  // ascending
  const std::vector<double>* y = nullptr;
  ImU32 colour = IM_COL32_WHITE;
  float thickness = 1.5f;
  bool points = false;  // draw markers at the points (measured values) instead of a line
  // Changes whenever the data behind x and y changes without changing their address or size
  // (another x column, another smoothing): the widget caches per line on (address, size, version).
  std::uint64_t version = 0;
  // A band behind the line (a seed group's minimum and maximum), at the line's x; version
  // covers it too. Filled in the line's colour, translucent.
  const std::vector<double>* band_low = nullptr;
  const std::vector<double>* band_high = nullptr;
};

struct PlotMarker {
  double x = 0;
  ImU32 colour = IM_COL32(200, 200, 200, 160);
  std::string label;  // shown on hover
};

struct Plot {
  std::string id;  // unique per panel; keys the zoom state
  std::string x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<PlotLine> lines;
  std::vector<PlotMarker> markers;
  std::string empty_text = "no data";  // shown when nothing is drawable
};

// Draws the plot into a region of `size` (0 = fill the available space). Returns the
// index of the hovered line, or -1.
int plot_draw(const Plot& plot, ImVec2 size = ImVec2(0, 0));

// The colour of the k-th series (a qualitative palette, cycled).
ImU32 series_colour(std::size_t k);

}  // namespace tfw::gui
