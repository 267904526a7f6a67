// The keys of [train], declared once: each key's name, how it is read and checked, and how it
// is written back into the resolved config. train_parse and train_to_toml walk the list, and
// tests hold it to docs/configs.md and to a round trip, so a key is not read without being
// written back, nor added without its documentation.
#pragma once

#include <vector>

#include <toml++/toml.h>

#include "engine/config/run_config.h"
#include "engine/core/config_table.h"

namespace tfw {

struct TrainKey {
  const char* name;
  // Reads the key from `t` into `c` and checks it on its own; the checks that span keys come
  // after the whole list (train_parse).
  void (*read)(ConfigTable& t, const char* key, TrainConfig& c);
  // Writes the key into `t` where the resolved config holds it: always, or only when set, so
  // that the configs stored before an optional key existed stay byte-identical.
  void (*write)(const TrainConfig& c, const char* key, toml::table& t);
};

// Every key of [train], in the order they are read.
const std::vector<TrainKey>& train_keys();

// [train] read through the list, then checked across keys (one budget; TF32 only on CUDA; no
// FLOPs budget with growth).
TrainConfig train_parse(ConfigTable& t);
// [train] as the resolved config writes it.
toml::table train_to_toml(const TrainConfig& c);

}  // namespace tfw
