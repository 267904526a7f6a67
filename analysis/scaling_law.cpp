// See scaling_law.h. Parameters are optimised as theta = (a, alpha, b, beta, e).
#include "analysis/scaling_law.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw::analysis {

namespace {

using Theta = std::array<double, 5>;  // a, alpha, b, beta, e
constexpr double kHuberDelta = 1e-3;

struct LogPoint {
  double log_n, log_d, log_loss;
};

double huber(double r) {
  const double a = std::fabs(r);
  return a <= kHuberDelta ? 0.5 * r * r : kHuberDelta * (a - 0.5 * kHuberDelta);
}

double huber_slope(double r) { return std::clamp(r, -kHuberDelta, kHuberDelta); }

// log L predicted: log(e^{a - alpha log N} + e^{b - beta log D} + e^e), computed stably.
double log_predict(const Theta& t, double log_n, double log_d, double weights[3]) {
  const double z[3] = {t[0] - t[1] * log_n, t[2] - t[3] * log_d, t[4]};
  const double top = std::max({z[0], z[1], z[2]});
  double sum = 0;
  for (int k = 0; k < 3; ++k) sum += std::exp(z[k] - top);
  if (weights != nullptr) {
    for (int k = 0; k < 3; ++k) weights[k] = std::exp(z[k] - top) / sum;
  }
  return top + std::log(sum);
}

double objective(const Theta& t, const std::vector<LogPoint>& points, Theta* gradient) {
  double total = 0;
  if (gradient != nullptr) gradient->fill(0);
  for (const LogPoint& p : points) {
    double w[3];
    const double r = log_predict(t, p.log_n, p.log_d, w) - p.log_loss;
    total += huber(r);
    if (gradient != nullptr) {
      const double g = huber_slope(r);
      (*gradient)[0] += g * w[0];
      (*gradient)[1] += -g * w[0] * p.log_n;
      (*gradient)[2] += g * w[1];
      (*gradient)[3] += -g * w[1] * p.log_d;
      (*gradient)[4] += g * w[2];
    }
  }
  return total;
}

// BFGS with a backtracking (Armijo) line search; returns the final objective.
double bfgs(Theta& t, const std::vector<LogPoint>& points, int iterations) {
  constexpr int n = 5;
  double h[n][n] = {};  // inverse Hessian estimate
  for (int i = 0; i < n; ++i) h[i][i] = 1;
  Theta g;
  double f = objective(t, points, &g);
  for (int it = 0; it < iterations; ++it) {
    Theta dir{};
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) dir[i] -= h[i][j] * g[j];
    }
    double slope = 0;
    for (int i = 0; i < n; ++i) slope += dir[i] * g[i];
    if (slope >= 0) {  // not a descent direction: restart from the gradient
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) h[i][j] = i == j;
        dir[i] = -g[i];
      }
      slope = 0;
      for (int i = 0; i < n; ++i) slope -= g[i] * g[i];
    }
    if (-slope < 1e-30) break;
    double step = 1;
    Theta next;
    Theta g_next;
    double f_next = f;
    bool moved = false;
    for (int k = 0; k < 60; ++k, step *= 0.5) {
      for (int i = 0; i < n; ++i) next[i] = t[i] + step * dir[i];
      f_next = objective(next, points, &g_next);
      if (std::isfinite(f_next) && f_next <= f + 1e-4 * step * slope) {
        moved = true;
        break;
      }
    }
    if (!moved) break;
    Theta s, y;
    double sy = 0;
    for (int i = 0; i < n; ++i) {
      s[i] = next[i] - t[i];
      y[i] = g_next[i] - g[i];
      sy += s[i] * y[i];
    }
    const double improvement = f - f_next;
    t = next;
    g = g_next;
    f = f_next;
    if (sy > 1e-18) {  // the BFGS update of the inverse Hessian
      double hy[n] = {}, yhy = 0;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) hy[i] += h[i][j] * y[j];
      }
      for (int i = 0; i < n; ++i) yhy += y[i] * hy[i];
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          h[i][j] += ((sy + yhy) * s[i] * s[j]) / (sy * sy) - (hy[i] * s[j] + s[i] * hy[j]) / sy;
        }
      }
    }
    if (improvement < 1e-16 * std::max(1.0, std::fabs(f))) break;
  }
  return f;
}

}  // namespace

double ScalingLaw::predict(double n, double d) const { return E + A / std::pow(n, alpha) + B / std::pow(d, beta); }

ScalingFit scaling_law_fit(const std::vector<ScalingPoint>& input) {
  std::vector<LogPoint> points;
  std::set<std::pair<double, double>> distinct;
  for (const ScalingPoint& p : input) {
    if (!(p.n > 0 && p.d > 0 && p.loss > 0) || !std::isfinite(p.n) || !std::isfinite(p.d) || !std::isfinite(p.loss)) {
      throw UsageError(fmt::format("a scaling point needs positive finite N, D and loss: got N = {}, D = {}, loss = {}",
                                   p.n, p.d, p.loss));
    }
    points.push_back({std::log(p.n), std::log(p.d), std::log(p.loss)});
    distinct.insert({p.n, p.d});
  }
  if (distinct.size() < kMinScalingPoints) {
    throw UsageError(with_hint(
        fmt::format("a scaling law has five parameters: it needs at least {} distinct (parameters, tokens) points, "
                    "and there are {}",
                    kMinScalingPoints, distinct.size()),
        "finish runs of more sizes or budgets of this family (for example an experiment with a grid over the model "
        "size and train.max_tokens)"));
  }
  // Hoffmann et al.'s grid of starts, then BFGS from each; the best wins.
  Theta best{};
  double best_f = std::numeric_limits<double>::infinity();
  for (double alpha : {0.0, 0.5, 1.0, 1.5, 2.0}) {
    for (double beta : {0.0, 0.5, 1.0, 1.5, 2.0}) {
      for (double e : {-1.0, -0.5, 0.0, 0.5, 1.0}) {
        for (double a : {0.0, 5.0, 10.0, 15.0, 20.0, 25.0}) {
          for (double b : {0.0, 5.0, 10.0, 15.0, 20.0, 25.0}) {
            Theta t = {a, alpha, b, beta, e};
            const double f = bfgs(t, points, 300);
            if (f < best_f) {
              best_f = f;
              best = t;
            }
          }
        }
      }
    }
  }
  ScalingFit fit;
  fit.law = {std::exp(best[4]), std::exp(best[0]), best[1], std::exp(best[2]), best[3]};
  fit.points = input.size();
  fit.distinct = distinct.size();
  fit.objective = best_f;
  double squares = 0;
  for (const ScalingPoint& p : input) {
    const double predicted = fit.law.predict(p.n, p.d);
    squares += std::pow(std::log(predicted) - std::log(p.loss), 2);
    fit.max_relative_error = std::max(fit.max_relative_error, std::fabs(predicted / p.loss - 1));
  }
  fit.rms_log_error = std::sqrt(squares / static_cast<double>(input.size()));
  fit.n_min = fit.n_max = input.front().n;
  fit.d_min = fit.d_max = input.front().d;
  for (const ScalingPoint& p : input) {
    fit.n_min = std::min(fit.n_min, p.n);
    fit.n_max = std::max(fit.n_max, p.n);
    fit.d_min = std::min(fit.d_min, p.d);
    fit.d_max = std::max(fit.d_max, p.d);
  }
  return fit;
}

}  // namespace tfw::analysis
