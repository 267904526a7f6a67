// See stats.h. The incomplete beta is evaluated by its continued fraction (modified Lentz),
// on the side of x where it converges fast; the t quantile inverts the CDF by bisection,
// which is slow only in theory (about 100 halvings to the last bit) and never fails.
#include "analysis/stats.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw::analysis {

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// The continued fraction of I_x(a, b), valid for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-16;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    // Even step.
    double numerator = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + numerator * d;
    c = 1 + numerator / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    // Odd step.
    numerator = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + numerator * d;
    c = 1 + numerator / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < eps) break;
  }
  return h;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
  if (!(x >= 0 && x <= 1) || !(a > 0) || !(b > 0)) return kNaN;
  if (x == 0 || x == 1) return x;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * beta_fraction(a, b, x) / a;
  return 1 - std::exp(log_front) * beta_fraction(b, a, 1 - x) / b;
}

double student_t_cdf(double t, double df) {
  if (!(df > 0) || std::isnan(t)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  // P(|T| > |t|) = I_{df / (df + t²)}(df / 2, 1 / 2).
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) return kNaN;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  if (p == 0.5) return 0;
  double low = 0, high = 1;
  while (student_t_cdf(high, df) < p) high *= 2;  // df = 1, p = 0.9999: t ≈ 3183
  for (int i = 0; i < 200 && high - low > 1e-15 * high; ++i) {
    const double mid = 0.5 * (low + high);
    (student_t_cdf(mid, df) < p ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

MeanInterval mean_interval(const std::vector<double>& values, double level) {
  if (values.empty()) throw UsageError("a mean of no values: the group is empty");
  if (!(level > 0 && level < 1)) throw UsageError(fmt::format("confidence level {} is not in (0, 1)", level));
  MeanInterval m;
  m.n = values.size();
  m.level = level;
  double sum = 0;
  for (double v : values) sum += v;
  m.mean = sum / static_cast<double>(m.n);
  if (m.n < 2) {
    m.sd = m.half_width = m.low = m.high = kNaN;
    return m;
  }
  double squares = 0;
  for (double v : values) squares += (v - m.mean) * (v - m.mean);
  m.sd = std::sqrt(squares / static_cast<double>(m.n - 1));
  m.half_width =
      student_t_quantile((1 + level) / 2, static_cast<double>(m.n - 1)) * m.sd / std::sqrt(static_cast<double>(m.n));
  m.low = m.mean - m.half_width;
  m.high = m.mean + m.half_width;
  return m;
}

PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b, double level) {
  if (a.size() != b.size()) {
    throw UsageError(
        fmt::format("a paired difference needs as many values on each side: {} against {}", a.size(), b.size()));
  }
  if (a.empty()) throw UsageError("a paired difference of no pairs: both groups are empty");
  PairedDifference result;
  std::vector<double> differences;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - b[i];
    differences.push_back(d);
    if (d < 0) result.negative += 1;
    if (d > 0) result.positive += 1;
    if (d == 0) result.zero += 1;
  }
  result.difference = mean_interval(differences, level);
  return result;
}

}  // namespace tfw::analysis
