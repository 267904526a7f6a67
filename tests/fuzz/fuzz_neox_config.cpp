// libFuzzer target: a NeoX config's text (engine/interop/neox_config.h), rewritten into JSON and
// parsed within its limits; an accepted one is printed back (as error messages do). Any
// outcome but an object or a UsageError is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/core/error.h"
#include "engine/interop/neox_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const nlohmann::json config =
        tfw::neox_config_parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yml");
    if (!config.is_object()) __builtin_trap();
    (void)config.dump();
  } catch (const tfw::UsageError&) {}
  return 0;
}
