// executable_dir() (declared in registry.h), alone in a torch-free file so that the fuzz
// targets of the tokenizer build without the registry.
#include <filesystem>
#include <string>

#include "engine/plugin/registry.h"

namespace tfw {

std::string executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return ".";
  return exe.parent_path().string();
}

}  // namespace tfw
