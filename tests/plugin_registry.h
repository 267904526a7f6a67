// The in-tree plugins of this build (TFW_PLUGIN_DIR, build/plugins), loaded once: for the
// torch-free test suites (the runner's, the GUI core's). tests/support.h has the same for the
// suites that link torch.
#pragma once

#include "engine/plugin/registry.h"

namespace tfw::test {

inline const Registry& test_plugins() {
  static Registry* loaded = [] {
    auto* registry = new Registry();
    registry->load_folder(TFW_PLUGIN_DIR, "built-in");
    return registry;
  }();
  return *loaded;
}

}  // namespace tfw::test
