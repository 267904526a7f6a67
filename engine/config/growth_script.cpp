// See growth_script.h.
#include "engine/config/growth_script.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "engine/core/config_table.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/core/sha256.h"

namespace tfw {

namespace fs = std::filesystem;

GrowthScriptKeys growth_script_keys(const toml::table& options) {
  GrowthScriptKeys keys;
  ConfigTable view(options, "growth.options");
  keys.script = view.get_string("script", "");
  keys.sha256 = view.get_string("script_sha256", "");
  keys.timeout_seconds = view.get_int("timeout_seconds", kGrowthScriptDefaultTimeout);
  for (const auto& [key, value] : options) {
    if (key.str() == "script" || key.str() == "script_sha256" || key.str() == "timeout_seconds") continue;
    view.take(key.str());
    keys.script_options.insert(key, value);
  }
  view.finish();
  if (keys.script.empty()) {
    throw UsageError(with_hint("the script growth method needs the script to run",
                               "growth = { method = \"script\", script = \"grow.py\" } in an experiment, "
                               "options = { script = \"grow.py\" } in [[train.growth]], or tfw grow --method script "
                               "--script grow.py"));
  }
  if (keys.timeout_seconds < 1 || keys.timeout_seconds > 86400) {
    view.fail("timeout_seconds", fmt::format("{} is not a time limit in seconds", keys.timeout_seconds),
              "give 1 to 86400 (the default is 600, ten minutes)");
  }
  const bool hex = keys.sha256.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!keys.sha256.empty() && (keys.sha256.size() != 64 || !hex)) {
    view.fail("script_sha256", fmt::format("'{}' is not a SHA-256 (64 lowercase hex digits)", keys.sha256),
              "leave it out: tfw records the script's digest itself");
  }
  return keys;
}

std::string growth_script_sha256(const std::string& path) { return sha256_hex(growth_script_text(path)); }

std::string growth_script_text(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw UsageError(with_hint(
        fmt::format("growth script '{}' {}", path, fs::exists(path, ec) ? "is not a regular file" : "does not exist"),
        "give the path of a Python file (relative paths are read from the folder of the "
        "file that names them)"));
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) throw UsageError(fmt::format("growth script '{}' cannot be read: {}", path, ec.message()));
  if (size > kGrowthScriptMaxBytes) {
    throw UsageError(fmt::format("growth script '{}': {} bytes, more than a growth script may hold ({} bytes)", path,
                                 size, kGrowthScriptMaxBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(kGrowthScriptMaxBytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw UsageError(fmt::format("growth script '{}' cannot be read", path));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kGrowthScriptMaxBytes) {  // it grew since it was measured
    throw UsageError(
        fmt::format("growth script '{}': more than a growth script may hold ({} bytes)", path, kGrowthScriptMaxBytes));
  }
  return text;
}

void growth_script_allowed(const std::string& script) {
  if (confine_root().empty()) return;
  const char* allowed = std::getenv(kGrowthScriptsVariable);
  if (allowed == nullptr || *allowed == '\0') {
    throw UsageError(with_hint(fmt::format("growth by script is refused here: this is the engine service, which "
                                           "runs no script a client names ('{}')",
                                           script),
                               "use a built-in growth method, or ask the service's operator to allow a folder of "
                               "scripts (tfw serve --allow-growth-scripts DIR)"));
  }
  if (!path_inside(script, allowed)) {
    throw UsageError(
        with_hint(fmt::format("growth script '{}' resolves outside {}, the one folder whose growth scripts "
                              "this service runs",
                              script, allowed),
                  fmt::format("name a script inside {} by its absolute path", allowed)));
  }
}

std::string growth_script_verify(const GrowthScriptKeys& keys) { return sha256_hex(growth_script_read(keys)); }

std::string growth_script_read(const GrowthScriptKeys& keys) {
  growth_script_allowed(keys.script);
  std::string text = growth_script_text(keys.script);
  const std::string digest = sha256_hex(text);
  if (!keys.sha256.empty() && digest != keys.sha256) {
    throw UsageError(with_hint(fmt::format("growth script '{}' changed since the run was planned: its SHA-256 is {} "
                                           "now, the run's config records {}",
                                           keys.script, digest, keys.sha256),
                               "put the script back as it was, or plan the run again with the new script (a new "
                               "run name keeps the old run and its numbers)"));
  }
  return text;
}

void growth_script_pin(toml::table& options, const std::string& base_dir) {
  GrowthScriptKeys keys = growth_script_keys(options);
  fs::path path(keys.script);
  if (path.is_relative() && !base_dir.empty()) path = fs::path(base_dir) / path;
  keys.script = fs::absolute(path).lexically_normal().string();
  options.insert_or_assign("script", keys.script);
  growth_script_allowed(keys.script);
  // A digest given already (a stored config read again) stays: it is checked when the script runs.
  if (keys.sha256.empty()) options.insert_or_assign("script_sha256", growth_script_sha256(keys.script));
}

std::string toml_source_dir(const toml::node& node) {
  const auto& path = node.source().path;
  if (!path || path->empty()) return "";
  std::error_code ec;
  if (!fs::is_regular_file(*path, ec)) return "";
  return fs::absolute(*path).parent_path().string();
}

}  // namespace tfw
