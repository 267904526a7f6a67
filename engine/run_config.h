// A model configuration file: which family, and its [model] table, parsed by the family's
// plugin into a typed, validated ModelSpec. Later issues add [train], [data] and growth
// schedules to the same file; every key not read is an error naming file:line:col.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/plugin_api.h"

namespace tfw {

class Registry;

struct ModelConfig {
  std::string path;         // the file it came from
  std::string name;         // `name` key, or the file's stem
  std::string description;
  std::string family;
  std::shared_ptr<const ModelSpec> spec;
};

// Reads `path`, applies `--set` overrides and validates every key.
ModelConfig model_config_load(const Registry& registry, const std::string& path,
                              const std::vector<std::string>& overrides = {});

// The same from an already parsed table (tests, the schedule designer).
ModelConfig model_config_parse(const Registry& registry, const toml::table& table,
                               const std::string& path);

}  // namespace tfw
