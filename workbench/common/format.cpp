// See format.h.
#include "workbench/common/format.h"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

namespace tfw {

std::string grouped(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return value < 0 ? "-" + out : out;
}

std::string short_count(double value) {
  double magnitude = std::fabs(value);
  if (magnitude >= 1e9) return fmt::format("{:.3f}B", value / 1e9);
  if (magnitude >= 1e6) return fmt::format("{:.1f}M", value / 1e6);
  if (magnitude >= 1e3) return fmt::format("{:.1f}K", value / 1e3);
  return fmt::format("{}", value);
}

std::string scientific(double value) { return fmt::format("{:.3e}", value); }

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long>(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string local_time(double unix_seconds, const char* format) {
  if (unix_seconds <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  char text[64];
  std::strftime(text, sizeof(text), format, std::localtime(&t));
  return text;
}

}  // namespace tfw
