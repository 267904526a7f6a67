// Reading a validation curve at a budget: the loss at equal compute (or tokens), and the
// compute at which a loss is first reached. Both interpolate between evaluations linearly in
// the loss and linearly in log(x): training curves are close to straight on a log-compute
// axis, and the rule is the same for every run, so comparisons stay like with like.
#pragma once

#include <optional>
#include <vector>

namespace tfw::analysis {

struct CurvePoint {
  double x = 0;  // cumulative FLOPs or tokens, > 0
  double y = 0;  // the loss
};

// The loss at x. Points are taken in order of x (stable: of two points at the same x, as at
// a growth, the later one counts). Throws UsageError when x lies outside the curve, naming
// its range: the curve is never extrapolated.
double value_at(const std::vector<CurvePoint>& curve, double x);

// The smallest x at which the curve first reaches `target` (y <= target), interpolated in
// the segment where it crosses; nullopt when it never does.
std::optional<double> first_reaching(const std::vector<CurvePoint>& curve, double target);

// Points sorted by x (stable), without non-finite values or x <= 0.
std::vector<CurvePoint> curve_clean(std::vector<CurvePoint> curve);

}  // namespace tfw::analysis
