#include "workbench/cli/output.h"

#include <iostream>

namespace tfw::cli {

void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << "\n"; }

}  // namespace tfw::cli
