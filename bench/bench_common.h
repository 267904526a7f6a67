// Timing helpers for the benchmarks: interleaved repetitions, median seconds.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace tfw::bench {

inline double seconds_of(const std::function<void()>& body) {
  auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Runs each body once to warm up, then `repeats` rounds in which every body runs once in
// turn (so noise from the shared machine hits all of them alike). Median seconds each.
inline std::vector<double> interleaved(const std::vector<std::function<void()>>& bodies, int repeats) {
  for (const auto& body : bodies) body();
  std::vector<std::vector<double>> times(bodies.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < bodies.size(); ++i) times[i].push_back(seconds_of(bodies[i]));
  }
  std::vector<double> medians;
  for (auto& t : times) medians.push_back(median(t));
  return medians;
}

}  // namespace tfw::bench
