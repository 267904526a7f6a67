// Growth by script (docs/growth.md, "Growth by script"): the options of the `script` growth
// method that tfw itself reads, and the pinning of a script to its content. A config names a
// script by path; tfw resolves the path once, against the folder of the file that names it, and
// records the script's SHA-256 beside it, so that a changed script is a changed config (the
// batch refuses to skip a run whose script changed) and a growth never runs a script other
// than the one that was planned. Torch-free.
#pragma once

#include <cstdint>
#include <string>

#include <toml++/toml.h>

namespace tfw {

inline constexpr const char* kScriptGrowthMethod = "script";
// A growth script is source code, not data: a bigger file is refused before it is read.
inline constexpr std::uintmax_t kGrowthScriptMaxBytes = 1u << 20;
inline constexpr std::int64_t kGrowthScriptDefaultTimeout = 600;  // seconds

// The options tfw reads and does not pass on to the script.
struct GrowthScriptKeys {
  std::string script;  // an absolute path, once pinned
  std::string sha256;  // 64 hex digits; "" when not pinned
  std::int64_t timeout_seconds = kGrowthScriptDefaultTimeout;
  toml::table script_options;  // every other key: the script's own options
};

// Reads the options of a `script` growth: `script` (required), `script_sha256`,
// `timeout_seconds` (1 to 86,400) and the script's own options. UsageError naming the key.
GrowthScriptKeys growth_script_keys(const toml::table& options);

// The text of the script at `path`, and its SHA-256: UsageError when it is missing, not a
// regular file, or bigger than kGrowthScriptMaxBytes.
std::string growth_script_text(const std::string& path);
std::string growth_script_sha256(const std::string& path);

// The environment variable that allows one folder of growth scripts to a process confined to a
// folder (TFW_CONFINE: the engine service and its jobs); `tfw serve --allow-growth-scripts DIR`
// sets it. Elsewhere it has no effect.
inline constexpr const char* kGrowthScriptsVariable = "TFW_GROWTH_SCRIPTS";

// Refuses (UsageError) a script in a confined process (engine/core/home.h) unless
// TFW_GROWTH_SCRIPTS names a folder that holds it, symbolic links followed. Reads nothing.
void growth_script_allowed(const std::string& script);

// growth_script_verify's checks, and the text whose digest they checked: a growth runs these
// bytes (copied), not the file again, so the script cannot change between check and run.
std::string growth_script_read(const GrowthScriptKeys& keys);

// Checks that the script is allowed, exists and, when the options pin it, that its content is the pinned
// one (UsageError naming both digests otherwise); returns its digest.
std::string growth_script_verify(const GrowthScriptKeys& keys);

// Pins `options` (of a `script` growth) to a script: resolves `script` against `base_dir`
// (when relative) to an absolute path, and sets `script_sha256` to its digest unless the
// options hold one already (a stored config read again: the digest is checked when the
// script runs, so a config that names a script can still be read once the script changed).
// UsageError naming the key, or from growth_script_allowed.
void growth_script_pin(toml::table& options, const std::string& base_dir);

// The folder of the file a TOML node was parsed from, or "" when it came from no file (text
// parsed in memory): where a relative script path in it is resolved.
std::string toml_source_dir(const toml::node& node);

}  // namespace tfw
