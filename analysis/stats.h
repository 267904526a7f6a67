// Statistics for comparing runs across seeds: the Student t distribution, a mean with its
// confidence interval, and the paired difference of two groups of runs. Torch-free, and
// free of the store: plain numbers in, plain numbers out.
#pragma once

#include <cstddef>
#include <vector>

namespace tfw::analysis {

// P(T <= t) for Student's t with `df` degrees of freedom (df > 0).
double student_t_cdf(double t, double df);

// The t with P(T <= t) = p, for p in (0, 1).
double student_t_quantile(double p, double df);

// The regularised incomplete beta function I_x(a, b), x in [0, 1].
double incomplete_beta(double a, double b, double x);

// A sample's mean and its two-sided confidence interval from Student's t:
// mean ± t_{(1+level)/2, n-1} · sd / sqrt(n). With n = 1 there is no interval: half_width,
// low, high and sd are NaN (`has_interval()` says so).
struct MeanInterval {
  std::size_t n = 0;
  double mean = 0, sd = 0, half_width = 0, low = 0, high = 0, level = 0.95;
  bool has_interval() const { return n >= 2; }
};
MeanInterval mean_interval(const std::vector<double>& values, double level = 0.95);

// The paired difference a[i] - b[i] over seeds (pairs by position): its mean and interval,
// and how many pairs have each sign. Throws UsageError on different lengths or no pairs.
struct PairedDifference {
  MeanInterval difference;
  std::size_t negative = 0, positive = 0, zero = 0;  // pairs with a < b, a > b, a == b
};
PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b, double level = 0.95);

}  // namespace tfw::analysis
