// `tfw import tokenformer DIR --out CHECKPOINT_DIR`: an official TokenFormer release (the
// GPT-NeoX-based code of Haiyang-W/TokenFormer) as a workbench checkpoint whose model computes
// the same function. docs/import.md lists every difference between the two models and how
// each is represented. Torch-free header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plugin/registry.h"

namespace tfw {

struct ImportRequest {
  std::string dir;  // the release folder
  std::vector<std::string>
      configs;            // NeoX configs (later ones override); empty: the one *.yml/*.yaml/config.json in dir
  std::string weights;    // empty: dir/pytorch_model.bin, else the one *.pt/*.bin in dir
  std::string tokenizer;  // empty: dir/tokenizer.json
  std::string out_dir;    // where the checkpoint, its run config and the tokenizer go
};

struct ImportResult {
  std::string checkpoint;  // out_dir/step-00000000.safetensors
  std::string config;      // out_dir/model.toml: a run config of the imported model
  std::string tokenizer;   // out_dir/tokenizer.json
  std::string model;       // the model's summary
  std::int64_t parameters = 0;
  std::int64_t tensors = 0;          // tensors read from the weights
  std::vector<std::string> ignored;  // keys read and not needed (rotary frequency buffers, a tied head's copy)
  std::vector<std::string> notes;    // how the official model's settings were represented
};

// Reads, checks and converts. Throws UsageError naming the file and the problem: no config or
// weights found, a setting our family cannot represent (said which and why), a missing,
// unexpected or misshapen tensor, an untied head, a bad tokenizer.json.
ImportResult import_tokenformer(const Registry& registry, const ImportRequest& request);

}  // namespace tfw
