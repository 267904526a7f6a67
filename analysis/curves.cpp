// See curves.h.
#include "analysis/curves.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw::analysis {

std::vector<CurvePoint> curve_clean(std::vector<CurvePoint> curve) {
  curve.erase(
      std::remove_if(curve.begin(), curve.end(),
                     [](const CurvePoint& p) { return !(p.x > 0) || !std::isfinite(p.x) || !std::isfinite(p.y); }),
      curve.end());
  std::stable_sort(curve.begin(), curve.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.x < b.x; });
  return curve;
}

double value_at(const std::vector<CurvePoint>& raw, double x) {
  const std::vector<CurvePoint> curve = curve_clean(raw);
  if (curve.empty()) throw UsageError("the curve has no evaluations");
  if (!(x >= curve.front().x && x <= curve.back().x)) {
    throw UsageError(with_hint(fmt::format("the budget {:.4g} lies outside the curve, which spans {:.4g} to {:.4g}", x,
                                           curve.front().x, curve.back().x),
                               "choose a budget inside every compared run's curve: curves are not extrapolated"));
  }
  // The last point at or before x, and the first after it.
  std::size_t i = 0;
  while (i + 1 < curve.size() && curve[i + 1].x <= x) ++i;
  if (curve[i].x == x || i + 1 == curve.size()) return curve[i].y;
  const CurvePoint& a = curve[i];
  const CurvePoint& b = curve[i + 1];
  const double f = (std::log(x) - std::log(a.x)) / (std::log(b.x) - std::log(a.x));
  return a.y + f * (b.y - a.y);
}

std::optional<double> first_reaching(const std::vector<CurvePoint>& raw, double target) {
  const std::vector<CurvePoint> curve = curve_clean(raw);
  for (std::size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].y > target) continue;
    if (i == 0 || curve[i - 1].x == curve[i].x || curve[i].y == target) return curve[i].x;
    const CurvePoint& a = curve[i - 1];
    const CurvePoint& b = curve[i];
    const double f = (target - a.y) / (b.y - a.y);  // a.y > target >= b.y
    return std::exp(std::log(a.x) + f * (std::log(b.x) - std::log(a.x)));
  }
  return std::nullopt;
}

}  // namespace tfw::analysis
