// How many threads a process computes with when nobody says: the cores it may run on, or
// OMP_NUM_THREADS where the user set it. Torch-free (libtfw_core): the runner and the service
// split the same count between the runs they start.
#pragma once

#include <string>

namespace tfw {

// The cores this process may run on: its CPU affinity (a Slurm allocation's, taskset's, a
// container's cpuset), else the machine's online cores. At least 1.
int cores_usable();

// The thread count a process uses when none is given (`--threads`): OMP_NUM_THREADS when it is
// a whole number from 1 to kThreadsMost (the first of its values where it lists one for each
// level of nesting, "4,2"; blanks and a '+' allowed, as libgomp reads it); else cores_usable().
// Where OMP_NUM_THREADS is set, not empty and unusable, `note` (when given) gets a line saying
// so and what was used instead; otherwise it is left empty.
int threads_default(std::string* note = nullptr);

// The most threads OMP_NUM_THREADS may ask for.
constexpr int kThreadsMost = 4096;

}  // namespace tfw
