// The keys of [data], declared once: each key's name, the task it belongs to, how it is read
// and checked, and how it is written back into the resolved config. data_parse and
// data_to_toml walk the list, and a test holds it to docs/configs.md and to a round trip, as
// train_keys.h does for [train].
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "engine/config/run_config.h"
#include "engine/core/config_table.h"
#include "engine/plugin/task.h"

namespace tfw {

struct DataKey {
  const char* name;
  Task task;  // a key belongs to one task's [data]: a language model's or an image classifier's
  // Reads the key from `t` into `c` and checks it; `config_path` is the config file's (relative
  // paths are read from its folder; empty for a config made in memory).
  void (*read)(ConfigTable& t, const char* key, const std::string& config_path, DataConfig& c);
  // Writes the key into `t` where the resolved config holds it: always, or only when set, so
  // that the configs stored before an optional key existed stay byte-identical.
  void (*write)(const DataConfig& c, const char* key, toml::table& t);
};

// Every key of [data], both tasks', in the order they are read.
const std::vector<DataKey>& data_keys();

// [data] of a family whose task is `task`, read through the list: only that task's keys are
// known, so another task's key is refused as unknown.
DataConfig data_parse(ConfigTable& t, const std::string& config_path, Task task);
// [data] as the resolved config writes it.
toml::table data_to_toml(const DataConfig& c);

}  // namespace tfw
