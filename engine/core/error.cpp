#include "engine/core/error.h"

namespace tfw {

std::string with_hint(const std::string& message, const std::string& hint) {
  if (hint.empty()) return message;
  return message + "\n  hint: " + hint;
}

}  // namespace tfw
