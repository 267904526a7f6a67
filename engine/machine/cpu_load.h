// Machine load during a run: the share of the machine's CPU time that OTHER processes used
// while this process ran, read from /proc (Linux). A run trained beside other work is slower
// by a factor no formula predicts; recording the share lets summaries flag contention
// instead of reporting a slow time as the run's own.
#pragma once

#include <optional>
#include <string>

namespace tfw {

class LoadMeter {
 public:
  LoadMeter();  // starts measuring
  // Other processes' CPU time since the start over (wall time × cores): 0 on an idle
  // machine, 1 when every core was busy with other work. NaN where /proc is not readable.
  double other_cpu_share() const;
  double seconds() const;  // wall time since the start

 private:
  double start_wall_ = 0, start_busy_ = 0, start_own_ = 0;
};

// Whether other processes took CPU time this run needed: more than the cores it left free
// (cores − `threads`) plus a quarter of the machine. A batch that splits the cores between
// its runs (`tfw run --jobs N`) is not contention; a run beside other heavy work is.
bool load_contended(double other_cpu_share, int threads);

// Chooses torch's thread count from the cores other processes leave free, while a run trains.
// OpenMP threads wait for each other at the end of every parallel region; a thread that
// shares its core with another busy process makes every region wait for its time slice. On
// 2 cores beside one busy process, the tiny training ran 5x slower with 2 threads than idle,
// and at idle speed with 1 (bench/busy_machine.sh). So once per window (1 s of wall time) the
// governor reads the other processes' CPU use over the window (LoadMeter) and uses
//   threads = clamp(round(cores − other processes' cores), 1, runtime_threads()),
// through runtime_use_threads(). It only lowers the count below what the run asked for, and
// raises it again when the load goes. It is off unless TFW_ADAPT_THREADS=1: changing the
// thread count changes how reductions are split, so a run that adapts is faster beside other
// work but no longer gives the same numbers for the same seed. By default a run keeps the
// count it starts with (and records it in its checkpoints); a training that starts beside
// busy processes makes OpenMP's threads wait passively at barriers (OMP_WAIT_POLICY=PASSIVE,
// workbench/cli/main.cpp), which costs a busy machine less without changing the arithmetic.
class ThreadGovernor {
 public:
  explicit ThreadGovernor(double window_seconds = 1.0);
  bool enabled() const { return enabled_; }
  // Between steps. Returns a line saying what changed and why, when the count changed.
  std::optional<std::string> update();

 private:
  bool enabled_ = true;
  double window_seconds_;
  LoadMeter window_;
};

}  // namespace tfw
