// See cores.h.
#include "engine/machine/cores.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace tfw {

int cores_usable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int allowed = CPU_COUNT(&set);
    if (allowed > 0) return allowed;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

int threads_default(std::string* note) {
  if (note != nullptr) note->clear();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int cores = cores_usable();
  if (omp == nullptr || *omp == '\0') return cores;
  // The first level's count: digits up to the end or to a comma, no sign, no spaces.
  const char* end = omp;
  long value = 0;
  while (*end >= '0' && *end <= '9' && value <= kThreadsMost) value = value * 10 + (*end++ - '0');
  const bool whole = end != omp && (*end == '\0' || *end == ',');
  if (whole && value >= 1 && value <= kThreadsMost) return static_cast<int>(value);
  if (note != nullptr) {
    std::string shown(omp, strnlen(omp, 40));
    *note = fmt::format(
        "OMP_NUM_THREADS={}{} is not a whole number from 1 to {}; using the {} core{} this process may "
        "run on (--threads N chooses)",
        shown, std::strlen(omp) > 40 ? "..." : "", kThreadsMost, cores, cores == 1 ? "" : "s");
  }
  return cores;
}

}  // namespace tfw
