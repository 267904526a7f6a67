// A training process's step times, kept once, from which progress and the summary both read
// tokens/s, MFU and the ETA. Totals define the summary's figures (training tokens over step
// time, docs/cli.md "Where the time goes"); progress reads a window of the most recent steps,
// so that slow first steps (allocation, warm-up) or a change of load do not stay in the
// figures a user watches for the rest of the run. Torch-free.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <cstdint>

namespace tfw {

class StepTimes {
 public:
  static constexpr std::size_t kWindow = 20;  // steps

  // One step: its compute time (forward, backward, update) and its batch draw.
  void add(double step_seconds, double data_seconds) {
    step_total_ += step_seconds;
    data_total_ += data_seconds;
    recent_[count_ % kWindow] = {step_seconds, data_seconds};
    ++count_;
  }

  // Time spent waiting for the device at a read-back (engine/train/trainer.cpp): the steps' own
  // work, finished then on an asynchronous device, so it counts as step time, in the totals
  // and in the window's most recent step.
  void add_wait(double seconds) {
    if (count_ == 0) return;
    step_total_ += seconds;
    recent_[(count_ - 1) % kWindow].step += seconds;
  }

  std::int64_t steps() const { return static_cast<std::int64_t>(count_); }
  double step_total() const { return step_total_; }
  double data_total() const { return data_total_; }
  // Means over every step of this process (0 before the first).
  double step_mean() const { return count_ ? step_total_ / static_cast<double>(count_) : 0.0; }
  double data_mean() const { return count_ ? data_total_ / static_cast<double>(count_) : 0.0; }
  // Means over the last kWindow steps (fewer at the start).
  double recent_step_mean() const { return recent_mean(false); }
  double recent_wall_mean() const { return recent_mean(true); }  // step + data

  // Training tokens over step time, and the share of the peak, over all steps or the window.
  double tokens_per_second(double tokens_per_step, bool recent) const {
    const double s = recent ? recent_step_mean() : step_mean();
    return s > 0 ? tokens_per_step / s : 0.0;
  }
  // NaN, "not measured", without a peak (a busy machine's probe is not used, peak.h) or when the
  // figure exceeds 1: a share above the peak is a peak measured wrong, never a true figure.
  double mfu(double flops_per_step, double peak_flops, bool recent) const {
    const double s = recent ? recent_step_mean() : step_mean();
    if (!(s > 0) || !(peak_flops > 0)) return std::numeric_limits<double>::quiet_NaN();
    const double share = flops_per_step / s / peak_flops;
    return share <= 1 ? share : std::numeric_limits<double>::quiet_NaN();
  }
  // The time the remaining steps will take at the recent pace (batch draws included).
  double eta_seconds(std::int64_t remaining_steps) const {
    return recent_wall_mean() * static_cast<double>(remaining_steps > 0 ? remaining_steps : 0);
  }

 private:
  struct Step {
    double step = 0, data = 0;
  };
  double recent_mean(bool with_data) const {
    const std::size_t n = count_ < kWindow ? count_ : kWindow;
    if (n == 0) return 0.0;
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += recent_[i].step + (with_data ? recent_[i].data : 0.0);
    return sum / static_cast<double>(n);
  }
  double step_total_ = 0, data_total_ = 0;
  std::size_t count_ = 0;
  std::array<Step, kWindow> recent_{};
};

}  // namespace tfw
