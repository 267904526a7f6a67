// Model configuration files -> ModelConfig. See run_config.h.
#include "engine/run_config.h"

#include <filesystem>

#include "engine/error.h"
#include "engine/registry.h"

namespace tfw {

ModelConfig model_config_parse(const Registry& registry, const toml::table& table,
                               const std::string& path) {
  ConfigTable top(table, "");
  ModelConfig config;
  config.path = path;
  config.name = top.get_string("name", std::filesystem::path(path).stem().string());
  config.description = top.get_string("description", "");
  config.family = top.require_string("family");
  const ModelFamily* family = nullptr;
  try {
    family = &registry.family(config.family);
  } catch (const UsageError& e) {
    top.fail("family", e.what(), "");
  }
  ConfigTable model = top.sub("model");
  config.spec = family->parse(model);
  model.finish();
  top.finish();
  return config;
}

ModelConfig model_config_load(const Registry& registry, const std::string& path,
                              const std::vector<std::string>& overrides) {
  toml::table table = config_read_file(path);
  config_apply_overrides(table, overrides);
  return model_config_parse(registry, table, path);
}

}  // namespace tfw
