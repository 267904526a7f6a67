// A model out to the Python ecosystem and back: `tfw export-model` writes a
// checkpoint's weights as DIR/model.safetensors (the model's own tensor names, float32, no
// optimiser) and DIR/config.json (the family, the model's settings as JSON, and the whole run
// config); `tfw import safetensors DIR` reads such a folder back into a workbench checkpoint,
// bit for bit. docs/export-model.md has the format and a short PyTorch loader. Torch-free header.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>
#include <toml++/toml.h>

#include "engine/interop/import.h"
#include "engine/plugin/registry.h"

namespace tfw {

inline constexpr const char* kModelExportFormat = "tfw-model";
inline constexpr std::int64_t kModelExportVersion = 1;
// config.json is small: a bigger or deeper one is refused before it is parsed.
inline constexpr std::uintmax_t kModelConfigMaxBytes = 4u << 20;
inline constexpr int kModelConfigMaxDepth = 16;

struct ModelExport {
  std::string weights;  // DIR/model.safetensors
  std::string config;   // DIR/config.json
  std::string model;    // the model's summary
  std::int64_t parameters = 0;
  std::int64_t tensors = 0;
  std::int64_t step = 0;  // the checkpoint's
};

// Exports the checkpoint at `checkpoint` into `out_dir` (created; its two files replaced).
ModelExport export_model(const Registry& registry, const std::string& checkpoint, const std::string& out_dir);

// Reads DIR/config.json and DIR/model.safetensors into `out_dir`/step-00000000.safetensors
// (weights only, as `tfw import tokenformer` writes) and `out_dir`/model.toml. UsageError,
// naming the file and the problem, for a missing or oversized file, another format or version,
// a model the family refuses, or a missing, extra or misshapen tensor; a failed import leaves
// nothing it wrote behind.
ImportResult import_safetensors(const Registry& registry, const std::string& dir, const std::string& out_dir);

// TOML tables as JSON objects (integers stay integers, floats floats; dates as strings), and
// back: the model's settings in config.json.
nlohmann::json toml_to_json(const toml::table& table);
toml::table json_to_toml(const nlohmann::json& object);

}  // namespace tfw
