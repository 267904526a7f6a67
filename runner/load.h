// Machine load during a run: the share of the machine's CPU time that OTHER processes used
// while this process ran, read from /proc (Linux). A run trained beside other work is slower
// by a factor no formula predicts; recording the share lets summaries flag contention
// instead of reporting a slow time as the run's own.
#pragma once

namespace tfw {

class LoadMeter {
 public:
  LoadMeter();  // starts measuring
  // Other processes' CPU time since the start over (wall time × cores): 0 on an idle
  // machine, 1 when every core was busy with other work. NaN where /proc is not readable.
  double other_cpu_share() const;

 private:
  double start_wall_ = 0, start_busy_ = 0, start_own_ = 0;
};

// Whether other processes took CPU time this run needed: more than the cores it left free
// (cores − `threads`) plus a quarter of the machine. A batch that splits the cores between
// its runs (`tfw run --jobs N`) is not contention; a run beside other heavy work is.
bool load_contended(double other_cpu_share, int threads);

}  // namespace tfw
