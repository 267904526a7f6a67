#include "engine/home.h"

#include <cstdlib>

namespace tfw {

std::string home_resolve(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("TFW_HOME"); env != nullptr && *env != '\0') return env;
  return "tfw-home";
}

std::string home_data_dir(const std::string& home) { return home + "/data"; }

}  // namespace tfw
