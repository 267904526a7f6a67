// GPT-NeoX config files (the official TokenFormer releases' *.yml) read as JSON: NeoX writes
// them in JSON's flow style with `#` comments, Python's True/False/None, single-quoted
// strings and trailing commas. Torch-free, so that its fuzz target builds without LibTorch.
// Bounded: a file of at most 16 MiB, values nested at most 32 levels (checked while parsing).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tfw {

// The settings of the config text `text` (from `path`, named in errors): an object. Throws
// UsageError naming the file: not JSON after the rewrite, nested too deeply, not an object.
nlohmann::json neox_config_parse(const std::string& text, const std::string& path);

// Reads and parses the file (a regular file of at most 16 MiB).
nlohmann::json neox_config_read(const std::string& path);

}  // namespace tfw
