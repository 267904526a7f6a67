#include "engine/machine/cpu_load.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "engine/machine/runtime.h"

namespace tfw {

namespace {

double wall_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double machine_cores() { return static_cast<double>(std::max(1u, std::thread::hardware_concurrency())); }

double ticks() { return static_cast<double>(sysconf(_SC_CLK_TCK)); }

// All CPUs' busy time (user, nice, system, irq, softirq, steal), in seconds.
double machine_busy() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return NAN;
  return (user + nice + system + irq + softirq + steal) / ticks();
}

// This process's CPU time (all threads, and its waited-for children), in seconds.
double own_busy() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto end = text.rfind(')');
  if (end == std::string::npos) return NAN;
  std::istringstream fields(text.substr(end + 2));
  std::string field;
  double utime = 0, stime = 0, cutime = 0, cstime = 0;
  for (int i = 3; i <= 17 && fields >> field; ++i) {  // fields 14-17: utime stime cutime cstime
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
    if (i == 16) cutime = std::stod(field);
    if (i == 17) cstime = std::stod(field);
  }
  return (utime + stime + cutime + cstime) / ticks();
}

}  // namespace

LoadMeter::LoadMeter() : start_wall_(wall_now()), start_busy_(machine_busy()), start_own_(own_busy()) {}

double LoadMeter::other_cpu_share() const {
  const double wall = wall_now() - start_wall_;
  const double cores = machine_cores();
  const double other = (machine_busy() - start_busy_) - (own_busy() - start_own_);
  if (!(wall > 0) || !std::isfinite(other)) return NAN;
  return std::clamp(other / (wall * cores), 0.0, 1.0);
}

double LoadMeter::seconds() const { return wall_now() - start_wall_; }

ThreadGovernor::ThreadGovernor(double window_seconds) : window_seconds_(window_seconds) {
  // Off unless asked for: a different thread count splits the reductions differently, so the
  // same config and seed would no longer give the same numbers.
  const char* adapt = std::getenv("TFW_ADAPT_THREADS");
  enabled_ = adapt && std::strcmp(adapt, "1") == 0 && runtime_threads() > 1;
}

std::optional<std::string> ThreadGovernor::update() {
  if (!enabled_ || window_.seconds() < window_seconds_) return std::nullopt;
  const double share = window_.other_cpu_share(), seconds = window_.seconds();
  window_ = LoadMeter();
  if (!std::isfinite(share)) return std::nullopt;
  const double cores = machine_cores();
  const int most = std::max(1, runtime_threads());
  const int threads = std::clamp(static_cast<int>(std::lround(cores - share * cores)), 1, most);
  const int before = runtime_active_threads();
  if (threads == before) return std::nullopt;
  runtime_use_threads(threads);
  return fmt::format("threads {} -> {}: other processes used {:.1f} of {:.0f} cores over the last {:.1f} s", before,
                     threads, share * cores, cores, seconds);
}

bool load_contended(double other_cpu_share, int threads) {
  if (!std::isfinite(other_cpu_share)) return false;
  const double cores = machine_cores();
  const double free_cores = std::max(0.0, cores - static_cast<double>(threads));
  return other_cpu_share * cores > free_cores + 0.25 * cores;
}

}  // namespace tfw
