// `tfw plugins`: every registered plugin with its kind, version and origin, and every
// library that was refused with the reason.
#include <iostream>

#include <fmt/format.h>

#include "engine/plugin/registry.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

void run_plugins(bool json) {
  const Registry& plugins = registry();
  if (json) {
    nlohmann::json loaded = nlohmann::json::array();
    for (const PluginEntry& entry : plugins.entries()) {
      loaded.push_back({{"name", entry.name},
                        {"kind", entry.kind},
                        {"version", entry.version},
                        {"origin", entry.origin},
                        {"path", entry.path}});
      if (entry.kind == "model-family") loaded.back()["task"] = plugins.family(entry.name).task();
    }
    nlohmann::json rejected = nlohmann::json::array();
    for (const PluginRejection& rejection : plugins.rejected()) {
      rejected.push_back({{"path", rejection.path}, {"reason", rejection.reason}});
    }
    print_json({{"plugin_api_version", kPluginApiVersion}, {"plugins", loaded}, {"rejected", rejected}});
    return;
  }
  std::cout << fmt::format("{:<16} {:<14} {:<8} {:<16} {}\n", "name", "kind", "version", "origin", "path");
  for (const PluginEntry& entry : plugins.entries()) {
    std::cout << fmt::format("{:<16} {:<14} {:<8} {:<16} {}\n", entry.name, entry.kind, entry.version, entry.origin,
                             entry.path);
  }
  if (plugins.entries().empty()) {
    std::cout << "(no plugins found: looked in " << executable_dir() << "/plugins and TFW_PLUGIN_PATH)\n";
  }
  for (const PluginRejection& rejection : plugins.rejected()) {
    std::cout << fmt::format("refused {}: {}\n", rejection.path, rejection.reason);
  }
}

}  // namespace

void add_plugins_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand("plugins", "List model-family and growth-method plugins");
  command->add_flag("--json", *json, "print JSON (keys in docs/cli.md)");
  command->callback([json] { run_plugins(*json); });
}

}  // namespace tfw::cli
