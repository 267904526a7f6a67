// TFW_HOME: the folder that holds the run store, checkpoints, prepared data and tokenizers.
// Resolution: the --home flag, else the TFW_HOME environment variable, else ./tfw-home.
#pragma once

#include <string>

namespace tfw {

std::string home_resolve(const std::string& flag = "");
std::string home_data_dir(const std::string& home);  // <home>/data

}  // namespace tfw
