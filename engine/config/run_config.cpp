// Run configuration files -> RunConfig. See run_config.h.
#include "engine/config/run_config.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/config/data_keys.h"
#include "engine/config/train_keys.h"
#include "engine/core/home.h"
#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/core/sha256.h"
#include "engine/plugin/task.h"

namespace tfw {

namespace {
std::atomic<DeviceCheck> installed_device_check{nullptr};
}  // namespace

DeviceCheck device_check_install(DeviceCheck check) { return installed_device_check.exchange(check); }

std::optional<DeviceProblem> device_check(const std::string& name) {
  if (std::optional<DeviceProblem> problem = device_name_problem(name)) return problem;
  if (const DeviceCheck check = installed_device_check.load()) return check(name);
  return std::nullopt;
}

std::string mask_label(const std::vector<std::string>& use) { return fmt::format("{}", fmt::join(use, "+")); }

RunConfig run_config_parse(const Registry& registry, const toml::table& table, const std::string& path) {
  ConfigTable top(table, "");
  RunConfig config;
  ModelConfig& model = config.model;
  model.path = path;
  model.name = top.get_string("name", std::filesystem::path(path).stem().string());
  model.description = top.get_string("description", "");
  model.family = top.require_string("family");
  const ModelFamily* family = nullptr;
  try {
    family = &registry.family(model.family);
  } catch (const UsageError& e) {
    top.fail("family", e.what(), "");
  }
  ConfigTable model_table = top.sub("model");
  model.spec = family->parse(model_table);
  model_table.finish();
  // The registry refuses a family whose task this tfw does not know (task_known).
  const std::optional<Task> task = task_parse(family->task());
  if (!task) {
    top.fail("family", fmt::format("model family '{}' declares the unknown task '{}'", model.family, family->task()),
             "");
  }
  ConfigTable data_table = top.sub("data");
  config.data = data_parse(data_table, path, *task);
  data_table.finish();
  ConfigTable train_table = top.sub("train");
  config.train = train_parse(train_table);
  train_table.finish();
  top.finish();
  return config;
}

toml::table run_config_to_toml(const RunConfig& config) {
  const ModelConfig& model = config.model;
  toml::table table{{"name", model.name},
                    {"family", model.family},
                    {"model", model.spec->to_toml()},
                    {"data", data_to_toml(config.data)},
                    {"train", train_to_toml(config.train)}};
  if (!model.description.empty()) table.insert("description", model.description);
  return table;
}

std::string run_config_text(const RunConfig& config) {
  std::ostringstream text;
  text << run_config_to_toml(config);
  return text.str();
}

std::string config_identity(const toml::table& table) {
  // As JSON: TOML's printer keeps how a file wrote a table (inline or not), JSON has one form.
  std::ostringstream text;
  text << toml::json_formatter{table};
  return sha256_hex(text.str());
}

RunConfig run_config_load(const Registry& registry, const std::string& path,
                          const std::vector<std::string>& overrides) {
  toml::table table = config_read_file(path);
  config_apply_overrides(table, overrides);
  return run_config_parse(registry, table, path);
}

ModelConfig model_config_parse(const Registry& registry, const toml::table& table, const std::string& path) {
  return run_config_parse(registry, table, path).model;
}

ModelConfig model_config_load(const Registry& registry, const std::string& path,
                              const std::vector<std::string>& overrides) {
  return run_config_load(registry, path, overrides).model;
}

}  // namespace tfw
