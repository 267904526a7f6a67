// How deeply a JSON text nests, scanned before it is parsed: hostile input nested a million
// levels deep is refused without building it (service messages, run bundles). Torch-free.
#pragma once

#include <string_view>

namespace tfw {

// The deepest nesting of arrays and objects in `text` (strings and their escapes skipped),
// scanning no further than one level past `limit`.
int json_nesting_depth(std::string_view text, int limit);

}  // namespace tfw
