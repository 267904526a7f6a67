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

namespace {

// One level's count of OMP_NUM_THREADS as libgomp reads it: blanks, an optional '+', digits,
// blanks. Advances `p` past it; -1 when there is no such number or it is above kThreadsMost.
long level_count(const char*& p) {
  while (*p == ' ' || *p == '\t') ++p;
  if (*p == '+') ++p;
  const char* digits = p;
  long value = 0;
  while (*p >= '0' && *p <= '9') {
    if (value <= kThreadsMost) value = value * 10 + (*p - '0');
    ++p;
  }
  const bool any = p != digits;
  while (*p == ' ' || *p == '\t') ++p;
  return !any || value > kThreadsMost ? -1 : value;
}

}  // namespace

int threads_default(std::string* note) {
  if (note != nullptr) note->clear();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int cores = cores_usable();
  if (omp == nullptr || *omp == '\0') return cores;
  // The first level's count, then the other levels' (checked, not used): "4" or "4,2".
  const char* p = omp;
  const long first = level_count(p);
  bool whole = first >= 1;
  while (whole && *p == ',') whole = level_count(++p) >= 1;
  if (whole && *p == '\0') return static_cast<int>(first);
  if (note != nullptr) {
    const std::string shown(omp, strnlen(omp, 40));
    *note = fmt::format(
        "OMP_NUM_THREADS={}{} is not a whole number from 1 to {} (or a list of them, one a level of "
        "nesting); using the {} core{} this process may run on (--threads N chooses)",
        shown, std::strlen(omp) > 40 ? "..." : "", kThreadsMost, cores, cores == 1 ? "" : "s");
  }
  return cores;
}

}  // namespace tfw
