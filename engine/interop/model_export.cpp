#include "engine/interop/model_export.h"

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/core/json_depth.h"
#include "engine/config/run_config.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json node_to_json(const toml::node& node) {
  if (const auto* table = node.as_table()) return toml_to_json(*table);
  if (const auto* array = node.as_array()) {
    json out = json::array();
    for (const toml::node& item : *array) out.push_back(node_to_json(item));
    return out;
  }
  if (auto i = node.value_exact<std::int64_t>()) return *i;
  if (auto d = node.value_exact<double>()) return *d;
  if (auto b = node.value_exact<bool>()) return *b;
  if (auto s = node.value_exact<std::string>()) return *s;
  std::ostringstream text;  // a date, a time or both
  if (const auto* date = node.as_date()) text << *date;
  if (const auto* time = node.as_time()) text << *time;
  if (const auto* date_time = node.as_date_time()) text << *date_time;
  return text.str();
}

toml::array json_to_array(const json& array);

// Hands `value` as its TOML value to `add`; a null, or an integer past int64, has no TOML form.
template <class Add>
void json_value(const json& value, const std::string& key, Add add) {
  switch (value.type()) {
    case json::value_t::object: add(json_to_toml(value)); return;
    case json::value_t::array: add(json_to_array(value)); return;
    case json::value_t::number_integer: add(value.get<std::int64_t>()); return;
    case json::value_t::number_unsigned:
      if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) break;
      add(static_cast<std::int64_t>(value.get<std::uint64_t>()));
      return;
    case json::value_t::number_float: add(value.get<double>()); return;
    case json::value_t::boolean: add(value.get<bool>()); return;
    case json::value_t::string: add(value.get<std::string>()); return;
    default: break;
  }
  throw UsageError(with_hint(fmt::format("config.json: \"{}\" = {} has no TOML form", key, value.dump()),
                             "use numbers, strings, booleans, arrays and objects only"));
}

toml::array json_to_array(const json& array) {
  toml::array out;
  for (const json& item : array) json_value(item, "(array item)", [&](auto v) { out.push_back(std::move(v)); });
  return out;
}

// config.json of `dir`, read with bounds: size and nesting are checked before it is parsed.
json read_config_json(const std::string& dir) {
  const fs::path path = fs::path(dir) / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw UsageError(with_hint(fmt::format("{} not found", path.string()),
                               "give the folder `tfw export-model --out` wrote (config.json and model.safetensors)"));
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kModelConfigMaxBytes) {
    throw UsageError(fmt::format("{}: {} bytes, more than a model's config.json may hold ({} bytes)", path.string(),
                                 size, kModelConfigMaxBytes));
  }
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (json_nesting_depth(text, kModelConfigMaxDepth) > kModelConfigMaxDepth) {
    throw UsageError(fmt::format("{}: nested more than {} levels deep", path.string(), kModelConfigMaxDepth));
  }
  json config;
  try {
    config = json::parse(text);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("{} is not valid JSON: {}", path.string(), e.what()));
  }
  if (!config.is_object() || config.value("format", "") != kModelExportFormat) {
    throw UsageError(with_hint(
        fmt::format("{} is not a tfw model export (no \"format\": \"{}\")", path.string(), kModelExportFormat),
        "export a model with `tfw export-model RUN --out DIR` (docs/export-model.md)"));
  }
  const json version = config.value("format_version", json());
  if (!version.is_number_integer() || version.get<std::int64_t>() != kModelExportVersion) {
    throw UsageError(with_hint(fmt::format("{}: format_version {}, this tfw reads version {}", path.string(),
                                           version.dump(), kModelExportVersion),
                               "export it again with this tfw, or import it with the tfw that wrote it"));
  }
  return config;
}

// The run config config.json holds: its "config_toml" (a tfw export's), else a run config of
// its "family", "name" and "model" alone (a hand-written one); either way the model must agree.
RunConfig config_of(const Registry& registry, const json& config, const std::string& dir) {
  const std::string where = (fs::path(dir) / "config.json").string();
  try {
    toml::table table;
    if (config.contains("config_toml")) {
      if (!config["config_toml"].is_string())
        throw UsageError(fmt::format("{}: \"config_toml\" is not a string", where));
      table = toml::parse(config["config_toml"].get<std::string>(), where);
    } else {
      if (!config.contains("family") || !config["family"].is_string() || !config.contains("model")) {
        throw UsageError(with_hint(fmt::format("{} names no \"family\" and \"model\"", where),
                                   "docs/export-model.md lists what config.json holds"));
      }
      table.insert("family", config["family"].get<std::string>());
      if (config.contains("name") && config["name"].is_string())
        table.insert("name", config["name"].get<std::string>());
    }
    if (config.contains("model")) {
      if (!config["model"].is_object()) throw UsageError(fmt::format("{}: \"model\" is not an object", where));
      const toml::table model = json_to_toml(config["model"]);
      if (const toml::table* held = table["model"].as_table();
          held != nullptr && config_identity(*held) != config_identity(model)) {
        throw UsageError(with_hint(fmt::format("{}: \"model\" and the model of \"config_toml\" differ", where),
                                   "edit one of them so that both say the same, or remove \"config_toml\""));
      }
      table.insert_or_assign("model", model);
    }
    return run_config_parse(registry, table, where);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("{}: \"config_toml\" is not valid TOML: {}", where, e.description()));
  }
}

}  // namespace

json toml_to_json(const toml::table& table) {
  json out = json::object();
  for (const auto& [key, node] : table) out[std::string(key.str())] = node_to_json(node);
  return out;
}

toml::table json_to_toml(const json& object) {
  if (!object.is_object()) throw UsageError(fmt::format("config.json: {} is not an object", object.dump()));
  toml::table out;
  for (const auto& [key, value] : object.items()) {
    json_value(value, key, [&](auto v) { out.insert_or_assign(key, std::move(v)); });
  }
  return out;
}

ModelExport export_model(const Registry& registry, const std::string& checkpoint, const std::string& out_dir) {
  const CheckpointMeta meta = checkpoint_read_meta(checkpoint);
  const RunConfig config = checkpoint_run_config(registry, meta, checkpoint);
  std::shared_ptr<Model> model = registry.family(config.model.family).build(*config.model.spec, 0);
  checkpoint_load(checkpoint, *model, nullptr);

  fs::create_directories(out_dir);
  ModelExport result;
  result.weights = (fs::path(out_dir) / "model.safetensors").string();
  result.config = (fs::path(out_dir) / "config.json").string();
  model_weights_save(result.weights, *model, {{"format", "pt"}, {"tfw_format", kModelExportFormat}});
  result.tensors = static_cast<std::int64_t>(checkpoint_model_tensors(*model).size());
  result.model = config.model.spec->summary();
  result.parameters = config.model.spec->parameter_count();
  result.step = meta.step;
  const json out = {{"format", kModelExportFormat},
                    {"format_version", kModelExportVersion},
                    {"family", config.model.family},
                    {"name", config.model.name},
                    {"model", toml_to_json(config.model.spec->to_toml())},
                    {"parameters", result.parameters},
                    {"source",
                     {{"checkpoint", fs::absolute(checkpoint).string()},
                      {"step", meta.step},
                      {"tokens", meta.tokens},
                      {"flops", meta.flops},
                      {"inherited_flops", meta.inherited_flops}}},
                    {"config_toml", run_config_text(config)}};
  const std::string text = out.dump(2) + "\n";
  const std::string temp = result.config + ".tmp";
  text_file_write(temp, text, "export-model");
  fs::rename(temp, result.config);
  return result;
}

ImportResult import_safetensors(const Registry& registry, const std::string& dir, const std::string& out_dir) {
  const json exported = read_config_json(dir);
  const RunConfig config = config_of(registry, exported, dir);
  const std::string weights = (fs::path(dir) / "model.safetensors").string();
  std::error_code ec;
  if (!fs::is_regular_file(weights, ec)) {
    throw UsageError(
        with_hint(fmt::format("{} not found", weights), "config.json's folder must hold model.safetensors"));
  }
  std::shared_ptr<Model> model = registry.family(config.model.family).build(*config.model.spec, 0);
  model_weights_load(weights, *model);

  const bool made = !fs::exists(out_dir);
  fs::create_directories(out_dir);
  ImportResult result;
  result.config = (fs::path(out_dir) / "model.toml").string();
  try {
    text_file_write(result.config,
                    fmt::format("# Written by `tfw import safetensors` from {}\n{}\n", dir, run_config_text(config)),
                    "import");
    CheckpointMeta meta;
    meta.val_loss = meta.best_val_loss = std::nan("");
    meta.config_toml = run_config_text(config);
    result.checkpoint = checkpoint_save(out_dir, *model, nullptr, meta).path;
  } catch (...) {
    fs::remove(result.config, ec);
    if (made) fs::remove_all(out_dir, ec);
    throw;
  }
  result.tensors = static_cast<std::int64_t>(checkpoint_model_tensors(*model).size());
  result.model = config.model.spec->summary();
  result.parameters = config.model.spec->parameter_count();
  return result;
}

}  // namespace tfw
