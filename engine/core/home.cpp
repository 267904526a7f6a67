#include "engine/core/home.h"

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw {

namespace fs = std::filesystem;

std::string home_resolve(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("TFW_HOME"); env != nullptr && *env != '\0') return env;
  return "tfw-home";
}

std::string home_data_dir(const std::string& home) { return home + "/data"; }

bool name_ok(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  auto plain = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (!plain(name[0])) return false;
  for (char c : name) {
    if (!plain(c) && c != '_' && c != '-' && c != '.' && c != '+' && c != '=') return false;
  }
  return name.find("..") == std::string::npos;
}

void name_check(const std::string& name, const std::string& what, const std::string& where) {
  if (name_ok(name)) return;
  throw UsageError(with_hint(
      fmt::format("{}{}'{}' is not a usable {}: it becomes a file name", where, where.empty() ? "" : ": ", name, what),
      "use letters, digits and '_', '-', '.', '+', '=' (at most 128, starting with a letter or digit, no '..')"));
}

namespace {
thread_local std::string thread_confine;
}  // namespace

std::string confine_root() {
  if (!thread_confine.empty()) return thread_confine;
  const char* env = std::getenv("TFW_CONFINE");
  return env != nullptr ? env : "";
}

ConfineScope::ConfineScope(std::string root) : previous_(thread_confine) { thread_confine = std::move(root); }
ConfineScope::~ConfineScope() { thread_confine = previous_; }

bool path_inside(const std::string& path, const std::string& root) {
  std::error_code ec;
  const std::string p = fs::weakly_canonical(fs::absolute(path, ec), ec).string();
  const std::string r = fs::weakly_canonical(fs::absolute(root, ec), ec).string();
  if (ec || r.empty()) return false;
  return p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && (r.back() == '/' || p[r.size()] == '/'));
}

void confine_check(const std::string& path, const std::string& what) {
  const std::string root = confine_root();
  if (root.empty() || path_inside(path, root)) return;
  throw UsageError(
      with_hint(fmt::format("{} = '{}' is outside {}, the folder this job is confined to", what, path, root),
                "a job of the engine service may only read files inside TFW_HOME: copy the file "
                "there, or give a built-in corpus name"));
}

}  // namespace tfw
