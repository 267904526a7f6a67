// A switch read once from the environment and shared by every thread, that code may also set
// (tests and benchmarks compare both sides in one process): TFW_PATTENTION=reference,
// TFW_PATTENTION_SCALAR=1, TFW_ATTENTION=manual.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tfw {

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
