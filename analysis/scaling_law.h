// A scaling law fitted to finished runs: L(N, D) = E + A / N^alpha + B / D^beta, with N the
// parameters and D the training tokens, fitted as Hoffmann et al. 2022 (Chinchilla, approach
// 3): minimise the Huber loss (delta 1e-3) of log L against
// LSE(a - alpha log N, b - beta log D, e), with A = e^a, B = e^b, E = e^e, by BFGS from every
// point of a grid of starts, keeping the best. The law knows nothing of growth.
#pragma once

#include <cstddef>
#include <vector>

namespace tfw::analysis {

struct ScalingPoint {
  double n = 0, d = 0, loss = 0;  // parameters, tokens, final validation loss
};

struct ScalingLaw {
  double E = 0, A = 0, alpha = 0, B = 0, beta = 0;
  double predict(double n, double d) const;
};

struct ScalingFit {
  ScalingLaw law;
  std::size_t points = 0;                             // runs used
  std::size_t distinct = 0;                           // distinct (N, D) pairs among them
  double objective = 0;                               // the summed Huber loss at the optimum
  double rms_log_error = 0;                           // sqrt(mean (log L_pred - log L)^2): ~ the relative error
  double max_relative_error = 0;                      // max |L_pred / L - 1|
  double n_min = 0, n_max = 0, d_min = 0, d_max = 0;  // the range of the points: beyond it, extrapolation
  bool covers(double n, double d) const { return n >= n_min && n <= n_max && d >= d_min && d <= d_max; }
};

// The fewest distinct (N, D) points a fit accepts (five parameters).
constexpr std::size_t kMinScalingPoints = 5;

// Throws UsageError when fewer than kMinScalingPoints distinct (N, D) pairs are given, or a
// point is not finite and positive.
ScalingFit scaling_law_fit(const std::vector<ScalingPoint>& points);

}  // namespace tfw::analysis
