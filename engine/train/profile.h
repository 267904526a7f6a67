// `tfw train --profile STEPS`: where a training step's time goes. After a few
// warm-up steps, LibTorch's Kineto profiler records STEPS steps; the trace is written as a
// Chrome trace (opens in Perfetto or chrome://tracing) into the run's folder, and a table sums
// the steps' time by category:
//   matrix products, attention, Pattention normalisation, other element-wise work, the
//   optimiser, data, and host gaps.
// On the CPU the categories are each operator's own time (its time less its children's) on
// the training thread, an operator inside a tfw scope (tfw::optimizer, tfw::data,
// tfw::pattention_norm, tfw::attention: the fused CPU operators) counting for the scope; host gaps are the time inside
// the steps that no operator covers. On CUDA they are the device's kernel time, by the scope around each kernel on the
// device's timeline or else by its name; data is the host's, and host gaps are the time the device stood idle inside
// the steps. Either way the categories add up to the steps' wall time as the trainer measured it, less what the trace
// misses (the report says how much: under 5% on the CPU, test Profile.*).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfw {

// Steps run before the recorded ones (allocator, caches and kernels settle).
inline constexpr std::int64_t kProfileWarmupSteps = 3;

struct ProfileCategory {
  std::string name;
  double seconds = 0;
};

struct ProfileReport {
  std::string device;                          // "cpu" or "cuda"
  std::int64_t first_step = 0, last_step = 0;  // the steps recorded (1-based, inclusive)
  double wall_seconds = 0;                     // those steps' wall time, measured by the trainer
  double traced_seconds = 0;                   // the same steps as the trace has them (tfw::step scopes)
  std::vector<ProfileCategory> categories;     // in the table's order; they add up to traced_seconds
  std::string trace_path;                      // the Chrome trace
};

// The category of an operator (on the CPU) or a kernel (on CUDA) by its name, when no tfw scope
// around it says otherwise: "matrix products", "attention", "Pattention normalisation" or
// "other element-wise work".
std::string profile_category_of(const std::string& name, bool device_kernel);

// One span of the device's timeline, as the CUDA table reads it: a kernel, a copy or a memset
// (work), or the range a scope of the trainer spans there (annotation: tfw::step,
// tfw::pattention_norm, tfw::optimizer, ...), which is no work of its own.
struct DeviceSpan {
  std::string name;
  std::uint64_t start_ns = 0, end_ns = 0;
  bool annotation = false;
};

// The CUDA table: each piece of work counts once, for the scope whose annotation holds it
// (tfw::pattention_norm: "Pattention normalisation", tfw::optimizer: "the optimiser", ...) or
// else by its name (profile_category_of); data is `data_seconds` (the host's); host gaps are
// the time in [begin_ns, end_ns) (the steps, extended to their last kernel) that no work
// covers, less the data. The categories add up to report.traced_seconds, which it sets.
void device_categories(const std::vector<DeviceSpan>& spans, std::uint64_t begin_ns, std::uint64_t end_ns,
                       double data_seconds, ProfileReport& report);

// Records steps [first, first + count) of a training: before_step and after_step around each
// step; the report once the last has run. Not copyable; one at a time in a process.
class StepProfiler {
 public:
  // `first` is the first step to record (1-based, after its warm-up), `dir` where the trace goes.
  StepProfiler(std::int64_t first, std::int64_t count, bool cuda, std::string dir);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // `step` is the step about to run / that has just run (1-based). after_step returns true once,
  // when the last step was recorded and report() is ready.
  void before_step(std::int64_t step);
  bool after_step(std::int64_t step);
  const ProfileReport& report() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The report as a table, one line per category with its share and seconds per step, and a
// last line for what the trace misses of the measured wall time.
std::string profile_table(const ProfileReport& report);

// The report as JSON (written beside the trace as profile-steps-A-B.json).
std::string profile_json(const ProfileReport& report);

}  // namespace tfw
