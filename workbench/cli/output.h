// JSON printing for the subcommands; the number formatting lives in workbench/common/format.h
// (shared with the GUI) and is found from tfw::cli unqualified.
#pragma once

#include <nlohmann/json.hpp>

#include "workbench/common/format.h"

namespace tfw::cli {

void print_json(const nlohmann::json& value);

}  // namespace tfw::cli
