// Run configuration files -> RunConfig. See run_config.h.
#include "engine/config/run_config.h"

#include <atomic>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/config/tokenizer_name.h"
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

void device_check_install(DeviceCheck check) { installed_device_check.store(check); }

std::optional<DeviceProblem> device_check(const std::string& name) {
  if (std::optional<DeviceProblem> problem = device_name_problem(name)) return problem;
  if (const DeviceCheck check = installed_device_check.load()) return check(name);
  return std::nullopt;
}

std::string mask_label(const std::vector<std::string>& use) { return fmt::format("{}", fmt::join(use, "+")); }

namespace {

void confined_or_fail(ConfigTable& table, const char* key, const std::string& path) {
  const std::string root = confine_root();
  if (root.empty() || path_inside(path, root)) return;
  table.fail(key, fmt::format("'{}' is outside {}, the folder this job may read", path, root),
             "a job of the engine service reads files only inside TFW_HOME: copy the file there");
}

// data.tokenizer: byte, gpt2, or a tokenizer.json (relative to the config file's folder;
// kept absolute in the resolved config, so that checkpoints find it from anywhere).
std::string tokenizer_parse(ConfigTable& table, const std::string& config_path) {
  const std::string name = table.get_string("tokenizer", "byte");
  if (name == "byte" || name == "gpt2") return name;
  if (!tokenizer_is_file(name)) {
    table.fail("tokenizer", fmt::format("unknown tokenizer '{}'", name),
               "use byte, gpt2, or the path of a Hugging Face tokenizer.json (a name ending in .json)");
  }
  std::filesystem::path path(name);
  if (path.is_relative() && !config_path.empty()) path = std::filesystem::path(config_path).parent_path() / path;
  // Confined (a job of the service, or a submission it plans): the resolved path, the one the
  // job opens, must be inside; checked before existence, so that the error says nothing of
  // files outside.
  confined_or_fail(table, "tokenizer", path.string());
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    table.fail("tokenizer", fmt::format("no such tokenizer.json: {}", path.string()),
               "a relative path is read from the config file's folder");
  }
  return std::filesystem::absolute(path).lexically_normal().string();
}

ImageDataConfig image_data_parse(ConfigTable& table, const std::string& config_path) {
  ImageDataConfig image;
  image.dataset = table.get_string("dataset", image.dataset);
  if (image.dataset != "fashion-mnist") {
    std::filesystem::path path(image.dataset);
    if (path.is_relative() && !config_path.empty()) path = std::filesystem::path(config_path).parent_path() / path;
    confined_or_fail(table, "dataset", path.string());
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      table.fail("dataset", fmt::format("'{}' is neither a built-in dataset nor a folder", image.dataset),
                 "use \"fashion-mnist\" or a folder holding the IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte"
                 "[.gz]; a relative path is read from the config file's folder");
    }
    image.dataset = std::filesystem::absolute(path).lexically_normal().string();
  }
  image.validation = table.get_choice("validation", image.validation, {"test", "tuning"});
  image.tuning_size = table.get_int("tuning_size", image.tuning_size);
  if (image.tuning_size < 1) {
    table.fail("tuning_size", fmt::format("must be at least 1, got {}", image.tuning_size),
               "the number of training images held out for validation when validation = \"tuning\"");
  }
  image.crop_pad = table.get_int("crop_pad", image.crop_pad);
  if (image.crop_pad < 0 || image.crop_pad > 64) {
    table.fail("crop_pad", fmt::format("must be in 0..64, got {}", image.crop_pad),
               "the pixels of zero padding before a random crop; 0 turns cropping off");
  }
  image.flip = table.get_bool("flip", image.flip);
  return image;
}

DataConfig data_parse(ConfigTable& table, const std::string& config_path, Task task) {
  DataConfig data;
  data.task = task;
  if (task == Task::image_classification) {
    data.image = image_data_parse(table, config_path);
    return data;
  }
  data.corpus = table.get_string("corpus", data.corpus);
  data.tokenizer = tokenizer_parse(table, config_path);
  data.eval_corpora = table.get_string_array("eval_corpora");
  for (const std::string& corpus : data.eval_corpora) {
    if (corpus.empty()) table.fail("eval_corpora", "holds an empty name", "name a corpus: eval_corpora = [\"gcide\"]");
    if (corpus == data.corpus) {
      table.fail("eval_corpora", fmt::format("'{}' is the run's own corpus, which is evaluated anyway", corpus),
                 "list only other corpora");
    }
  }
  return data;
}

toml::table data_to_toml(const DataConfig& data) {
  if (data.task == Task::image_classification) {
    const ImageDataConfig& image = data.image;
    return toml::table{{"dataset", image.dataset},
                       {"validation", image.validation},
                       {"tuning_size", image.tuning_size},
                       {"crop_pad", image.crop_pad},
                       {"flip", image.flip}};
  }
  toml::table table{{"corpus", data.corpus}, {"tokenizer", data.tokenizer}};
  if (!data.eval_corpora.empty()) {  // absent when empty: older stored configs stay byte-identical
    toml::array corpora;
    for (const std::string& corpus : data.eval_corpora) corpora.push_back(corpus);
    table.insert("eval_corpora", std::move(corpora));
  }
  return table;
}

}  // namespace

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
