// Settings read from the environment. EnvChoice: a switch read once and shared by every
// thread, that code may also set (tests and benchmarks compare both sides in one process):
// TFW_PATTENTION=reference, TFW_PATTENTION_SCALAR=1, TFW_ATTENTION=manual,
// TFW_PATTENTION_CUDA=composition or registers, TFW_LOSS_CUDA=fused, TFW_ROTARY_CUDA=fused. env_seconds: a
// timeout (TFW_DIST_TIMEOUT, TFW_RECORD_TIMEOUT).
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw {

// The number of seconds > 0 in the environment variable `name`, or `fallback` when it is unset
// or empty; UsageError for anything else, so that a typo never silently means the default.
inline double env_seconds(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0)) {
    throw UsageError(with_hint(fmt::format("{}={}: expected a number of seconds > 0", name, text),
                               fmt::format("e.g. {}={} (the default)", name, fallback)));
  }
  return seconds;
}

class EnvChoice {
 public:
  constexpr EnvChoice(const char* variable, const char* value) : variable_(variable), value_(value) {}
  // Whether the variable equals the value, read at the first call, unless set() came first.
  bool on() {
    int choice = state_.load();
    if (choice < 0) {
      const char* env = std::getenv(variable_);
      choice = env != nullptr && std::strcmp(env, value_) == 0 ? 1 : 0;
      state_.store(choice);
    }
    return choice == 1;
  }
  void set(bool on) { state_.store(on ? 1 : 0); }

 private:
  const char* variable_;
  const char* value_;
  std::atomic<int> state_{-1};  // -1: not read from the environment yet
};

}  // namespace tfw
