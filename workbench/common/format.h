// Number, time and duration formatting shared by the CLI and the GUI. No dependencies
// beyond fmt.
#pragma once

#include <cstdint>
#include <string>

namespace tfw {

std::string grouped(std::int64_t value);   // 151881216 -> "151,881,216"
std::string short_count(double value);     // 151881216 -> "151.9M", 1.3e9 -> "1.310B"
std::string scientific(double value);      // 3.1e14 -> "3.10e+14"
std::string duration_text(double seconds); // 3725 -> "1h02m", 75 -> "1m15s", NaN -> "?"
std::string local_time(double unix_seconds, const char* format = "%Y-%m-%d %H:%M");  // "-" for 0

}  // namespace tfw
