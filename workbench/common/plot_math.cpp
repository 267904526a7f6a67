// See plot_math.h.
#include "workbench/common/plot_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace tfw {

double AxisMap::forward(double value) const {
  if (!log) return value;
  return value > 0 ? std::log10(value) : std::numeric_limits<double>::quiet_NaN();
}

double AxisMap::inverse(double transformed) const { return log ? std::pow(10.0, transformed) : transformed; }

bool axis_fit(const std::vector<const std::vector<double>*>& series, bool log, double pad, AxisMap& axis) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  AxisMap probe;
  probe.log = log;
  for (const std::vector<double>* values : series) {
    for (double v : *values) {
      const double t = probe.forward(v);
      if (!std::isfinite(t)) continue;
      lo = std::min(lo, t);
      hi = std::max(hi, t);
    }
  }
  if (!(lo <= hi)) return false;
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    lo -= 0.5;
    hi += 0.5;
  }
  const double span = hi - lo;
  axis.lo = lo - pad * span;
  axis.hi = hi + pad * span;
  axis.log = log;
  return true;
}

std::string tick_label(double value) {
  if (value == 0) return "0";
  const double magnitude = std::abs(value);
  if (magnitude >= 1e5 || magnitude < 1e-3) return scientific_label(value);
  return fmt::format("{:.6g}", value);
}

std::string scientific_label(double value) {
  if (value == 0) return "0";
  int exponent = static_cast<int>(std::floor(std::log10(std::abs(value))));
  double mantissa = value / std::pow(10.0, exponent);
  if (std::abs(mantissa) >= 9.995) {  // 9.9996e4 rounds to 10e4: say 1e5
    mantissa /= 10;
    exponent += 1;
  }
  return fmt::format("{:.3g}e{}", mantissa, exponent);
}

namespace {

// One axis, one format: every label in scientific notation when any needs it (no "50000"
// beside "1e5").
void label_ticks(std::vector<Tick>& ticks) {
  bool scientific = false;
  for (const Tick& t : ticks) {
    const double magnitude = std::abs(t.value);
    scientific |= magnitude >= 1e5 || (magnitude > 0 && magnitude < 1e-3);
  }
  for (Tick& t : ticks) t.label = scientific ? scientific_label(t.value) : fmt::format("{:.6g}", t.value);
}

// 1-2-5 ticks over [lo, hi] in data units (about `target` of them).
std::vector<Tick> linear_ticks(double lo, double hi, int target) {
  std::vector<Tick> ticks;
  const double raw = (hi - lo) / std::max(target, 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  }
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1) {
    const double v = k * step;  // a multiple, not a running sum: no drift across ticks
    ticks.push_back({std::abs(v) < step * 1e-9 ? 0.0 : v, "", true});
  }
  return ticks;
}

}  // namespace

std::vector<Tick> axis_ticks(const AxisMap& axis, int target) {
  std::vector<Tick> ticks;
  const double lo = std::min(axis.lo, axis.hi), hi = std::max(axis.lo, axis.hi);
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return ticks;
  if (axis.log && hi - lo < 1.0) {
    // Less than a decade (a loss from 2 to 5): decades would give one tick or none, so
    // 1-2-5 steps in data units, placed on the log axis.
    ticks = linear_ticks(std::pow(10.0, lo), std::pow(10.0, hi), target);
  } else if (axis.log) {
    const int first = static_cast<int>(std::floor(lo)), last = static_cast<int>(std::ceil(hi));
    const bool minors = hi - lo < 3.0;
    const int stride = std::max(1, (last - first) / std::max(target, 1));
    for (int e = first; e <= last; ++e) {
      const double decade = std::pow(10.0, e);
      if (e % stride == 0 && e >= lo - 1e-9 && e <= hi + 1e-9) ticks.push_back({decade, "", true});
      if (!minors) continue;
      for (double m : {2.0, 5.0}) {
        const double t = e + std::log10(m);
        if (t >= lo && t <= hi) ticks.push_back({m * decade, "", false});
      }
    }
  } else {
    ticks = linear_ticks(lo, hi, target);
  }
  label_ticks(ticks);
  return ticks;
}

std::vector<std::size_t> downsample_minmax(const std::vector<double>& x, const std::vector<double>& y, double x_lo,
                                           double x_hi, bool log_x, int columns) {
  std::vector<std::size_t> out;
  const std::size_t n = std::min(x.size(), y.size());
  if (n == 0 || columns <= 0) return out;
  // The visible range plus one point either side.
  std::size_t begin = static_cast<std::size_t>(std::lower_bound(x.begin(), x.begin() + n, x_lo) - x.begin());
  std::size_t end = static_cast<std::size_t>(std::upper_bound(x.begin(), x.begin() + n, x_hi) - x.begin());
  if (begin > 0) --begin;
  if (end < n) ++end;
  if (begin >= end) return out;
  if (end - begin <= static_cast<std::size_t>(4 * columns)) {
    for (std::size_t i = begin; i < end; ++i) out.push_back(i);
    return out;
  }
  AxisMap axis;
  axis.log = log_x;
  axis.lo = axis.forward(x_lo);
  axis.hi = axis.forward(x_hi);
  if (!std::isfinite(axis.lo) || !std::isfinite(axis.hi) || axis.hi <= axis.lo) {
    axis.lo = axis.forward(x[begin]);
    axis.hi = axis.forward(x[end - 1]);
  }
  const double scale = columns / std::max(axis.hi - axis.lo, 1e-300);
  auto column_of = [&](std::size_t i) {
    const double t = axis.forward(x[i]);
    return std::isfinite(t) ? static_cast<long>(std::floor((t - axis.lo) * scale)) : -1L;
  };
  out.reserve(static_cast<std::size_t>(2 * columns) + 4);
  out.push_back(begin);  // the ends, so the line reaches the plot's edges
  std::size_t i = begin;
  while (i < end) {
    const long column = column_of(i);
    std::size_t low = i, high = i;
    for (++i; i < end && column_of(i) == column; ++i) {
      if (std::isnan(y[low]) || y[i] < y[low]) low = i;
      if (std::isnan(y[high]) || y[i] > y[high]) high = i;
    }
    // In x order, each index once.
    for (std::size_t p : {std::min(low, high), std::max(low, high)}) {
      if (out.back() < p) out.push_back(p);
    }
  }
  if (out.back() < end - 1) out.push_back(end - 1);
  return out;
}

std::vector<double> ema(const std::vector<double>& values, double weight) {
  std::vector<double> out(values.size());
  if (weight <= 0) return values;
  double state = 0, norm = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) {
      out[i] = norm > 0 ? state / norm : values[i];
      continue;
    }
    state = weight * state + (1 - weight) * values[i];
    norm = weight * norm + (1 - weight);  // = 1 - weight^(k+1) after k + 1 values
    out[i] = state / norm;
  }
  return out;
}

std::ptrdiff_t nearest_point(const std::vector<double>& x, const std::vector<double>& y, const AxisMap& ax,
                             const AxisMap& ay, double sx, double sy, double px, double py, double radius) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n == 0) return -1;
  // x is ascending: search outward from the point at the cursor's x until the x distance
  // alone exceeds the best distance found.
  const double target = ax.inverse(ax.lo + px / sx);
  std::size_t centre = static_cast<std::size_t>(std::lower_bound(x.begin(), x.begin() + n, target) - x.begin());
  double best = radius * radius;
  std::ptrdiff_t found = -1;
  auto visit = [&](std::size_t i) {
    const double dx = (ax.forward(x[i]) - ax.lo) * sx - px, dy = (ay.forward(y[i]) - ay.lo) * sy - py;
    if (!std::isfinite(dx) || !std::isfinite(dy)) return true;
    const double d2 = dx * dx + dy * dy;
    if (d2 <= best) {
      best = d2;
      found = static_cast<std::ptrdiff_t>(i);
    }
    return dx * dx <= best;
  };
  for (std::size_t i = centre; i < n; ++i)
    if (!visit(i)) break;
  for (std::size_t i = centre; i-- > 0;)
    if (!visit(i)) break;
  return found;
}

int least_covered_corner(const std::vector<std::pair<double, double>>& points, double w, double h) {
  std::size_t counts[4] = {0, 0, 0, 0};
  for (const auto& [x, y] : points) {
    const bool right = x >= 1 - w, left = x <= w, top = y >= 1 - h, bottom = y <= h;
    counts[0] += right && top;
    counts[1] += left && top;
    counts[2] += right && bottom;
    counts[3] += left && bottom;
  }
  int best = 0;
  for (int corner = 1; corner < 4; ++corner) {
    if (counts[corner] < counts[best]) best = corner;
  }
  return best;
}

namespace {}  // namespace

double interpolate(const std::vector<double>& xs, const std::vector<double>& ys, double at, Outside outside) {
  const std::size_t n = std::min(xs.size(), ys.size());
  if (n == 0) return std::nan("");
  auto line = [&](std::size_t a, std::size_t b) {  // through points a and b, at `at`
    if (xs[b] == xs[a]) return ys[b];
    return ys[a] + (at - xs[a]) / (xs[b] - xs[a]) * (ys[b] - ys[a]);
  };
  if (at < xs[0] || at > xs[n - 1]) {
    const bool before = at < xs[0];
    if (outside == Outside::nan) return std::nan("");
    if (outside == Outside::hold || n == 1) return before ? ys[0] : ys[n - 1];
    return before ? line(0, 1) : line(n - 2, n - 1);
  }
  const auto begin = xs.begin();
  const std::size_t i =
      static_cast<std::size_t>(std::lower_bound(begin, begin + static_cast<std::ptrdiff_t>(n), at) - begin);
  if (xs[i] == at || i == 0) return ys[i];
  return line(i - 1, i);
}

SeedBand seed_band(const std::vector<XY>& runs) {
  SeedBand band;
  if (runs.empty()) return band;
  double first = -std::numeric_limits<double>::infinity(), last = std::numeric_limits<double>::infinity();
  for (const XY& run : runs) {
    const std::size_t n = std::min(run.x->size(), run.y->size());
    if (n == 0) return band;
    first = std::max(first, run.x->front());
    last = std::min(last, (*run.x)[n - 1]);
  }
  std::vector<double> grid;
  for (const XY& run : runs) {
    const std::size_t n = std::min(run.x->size(), run.y->size());
    for (std::size_t i = 0; i < n; ++i) {
      if ((*run.x)[i] >= first && (*run.x)[i] <= last) grid.push_back((*run.x)[i]);
    }
  }
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  for (double x : grid) {
    double sum = 0, low = std::numeric_limits<double>::infinity(), high = -low;
    int count = 0;
    for (const XY& run : runs) {
      const double y = interpolate(*run.x, *run.y, x, Outside::nan);
      if (!std::isfinite(y)) continue;
      sum += y;
      low = std::min(low, y);
      high = std::max(high, y);
      ++count;
    }
    if (count == 0) continue;
    band.x.push_back(x);
    band.mean.push_back(sum / count);
    band.low.push_back(low);
    band.high.push_back(high);
    band.count.push_back(count);
  }
  return band;
}

}  // namespace tfw
