// JSON from outside parsed within bounds checked while it is parsed: nesting, the number of
// containers (objects and arrays, the costly values) and of values in all. Memory and time stay
// proportional to the limits, not to what the input asks for: a line of 80 million empty arrays
// is refused after the limit, not after building them. The tree is built by nlohmann's own SAX
// DOM builder, in one pass (its callback parser rescans a parent object at every child's end,
// which made a header of 200,000 tensors take a minute). Torch-free.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tfw {

struct JsonBounds {
  int depth = 64;                             // containers inside one another
  std::size_t containers = 1 << 20;           // objects and arrays
  std::size_t values = std::size_t{1} << 23;  // every value and object key
};

// Parses `text` into `out`. Returns "" or what stopped it, to follow the caller's own words:
// "nests deeper than 8 levels", "holds more than 1048576 objects and arrays", "holds more than
// 8388608 values", or "is not valid JSON (...)". On failure `out` is null.
std::string json_parse_bounded(std::string_view text, const JsonBounds& bounds, nlohmann::json& out);

}  // namespace tfw
