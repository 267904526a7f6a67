// The arithmetic under the GUI's plot widget and the exported figures (workbench/results/figures.cpp),
// free of ImGui so that tests check it directly and the headless results need no GUI code:
// axis transforms (linear, log10), "nice" tick positions, min/max downsampling of long
// series to the pixel columns they cover, EMA smoothing, nearest-point search.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tfw {

// An axis maps data values to [0, 1] linearly or on log10 (values <= 0 are not drawable).
struct AxisMap {
  double lo = 0, hi = 1;  // in transformed units (log10 of the value when log)
  bool log = false;
  // value -> transformed; NaN for a value a log axis cannot show.
  double forward(double value) const;
  double inverse(double transformed) const;
  // value -> [0, 1] across the axis (outside for values outside the range).
  double unit(double value) const { return (forward(value) - lo) / (hi - lo); }
};

// The data range of values (finite, and > 0 for log) widened by `pad` of its span on each
// side; a degenerate range becomes a unit-wide one. Returns false if no value is drawable.
bool axis_fit(const std::vector<const std::vector<double>*>& series, bool log, double pad, AxisMap& axis);

struct Tick {
  double value;  // in data units
  std::string label;
  bool major = true;
};
// Tick marks for the axis: 1-2-5 steps for a linear axis (about `target` of them), decades
// (with 2 and 5 between when the range is under three decades) for a log axis, and 1-2-5
// steps in data units for a log axis under one decade. One format per axis: all labels in
// scientific notation ("5e4", "1e5", "1.5e5") when any value is >= 1e5 or < 1e-3.
std::vector<Tick> axis_ticks(const AxisMap& axis, int target = 6);
std::string tick_label(double value);        // one value alone: 0.001, 2.5, 1e6, 3.2e13
std::string scientific_label(double value);  // 50000 -> "5e4", 1.5e13 -> "1.5e13", 2.5e-4 -> "2.5e-4"

// Downsamples the points (x ascending) inside [x_lo, x_hi] (data units) for `columns` pixel
// columns: per column its minimum and maximum point in x order, plus the first and last
// point, so the drawn polyline has every column's extremes (the same vertical envelope as the
// full series) with at most 2 × columns + 2 points. Returns indices into x. Series of at most
// 4 × columns points come back whole (the visible part plus one point either side, so lines
// leave the plot edge).
std::vector<std::size_t> downsample_minmax(const std::vector<double>& x, const std::vector<double>& y, double x_lo,
                                           double x_hi, bool log_x, int columns);

// Exponential moving average with bias correction (weight in [0, 1): 0 = no smoothing):
// s_t = w·s_{t-1} + (1 - w)·v_t, reported as s_t / (1 - w^(t+1)). NaN values are skipped.
std::vector<double> ema(const std::vector<double>& values, double weight);

// y at `at` on the polyline through (xs[i], ys[i]), xs ascending (the shorter vector bounds
// it): a point's own y at its x (the first of equal xs), linear between neighbours, and
// outside [xs.front(), xs.back()] as `outside` says: NaN, the end's y held, or the end
// segment extended (a single point holds). NaN when there is no point.
enum class Outside { nan, hold, extend };
double interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double at, Outside outside);

// Runs that differ only in seed, drawn as one: their mean and their minimum and maximum at
// every x where all of them have a value. The grid is the union of the runs' x values inside
// the span every run covers ([largest first x, smallest last x]); each run is read there by
// linear interpolation in x between its neighbouring points. A run whose value there is not
// finite (a NaN evaluation) is left out of that x; an x where none is finite is left out.
// Past the span (a seed still running, a seed stopped early) there is no mean: the seeds are
// drawn alone. x of each run ascending.
struct SeedBand {
  std::vector<double> x, mean, low, high;
  std::vector<int> count;  // the runs averaged at each x
};
struct XY {
  const std::vector<double>* x = nullptr;
  const std::vector<double>* y = nullptr;
};
SeedBand seed_band(const std::vector<XY>& runs);

// The index of the point nearest to (x, y) in screen space, given the per-axis scales
// (pixels per transformed unit); -1 when none is within `radius` pixels.
std::ptrdiff_t nearest_point(const std::vector<double>& x, const std::vector<double>& y, const AxisMap& ax,
                             const AxisMap& ay, double sx, double sy, double px, double py, double radius);

// Where a legend of `w` × `h` (fractions of the plot area) covers the fewest of `points`
// (x, y in [0, 1] across the plot, y up): 0 top right, 1 top left, 2 bottom right, 3 bottom
// left; ties go to the earlier corner.
int least_covered_corner(const std::vector<std::pair<double, double>>& points, double w, double h);

}  // namespace tfw
