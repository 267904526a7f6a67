// `tfw checkpoints upgrade PATH... [--home H] [--json]`: converts legacy checkpoints (LibTorch
// archives, format version 1, whose loading can run code stored in them) into safetensors
// checkpoints, in place, and points the store's rows at the new files
// (engine/interop/checkpoint_upgrade.h, docs/store.md).
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/interop/checkpoint_upgrade.h"
#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

struct UpgradeArgs {
  std::vector<std::string> paths;
  std::string home;
  bool json = false;
};

void run_upgrade(const UpgradeArgs& args) {
  std::vector<std::string> legacy;
  for (const std::string& path : args.paths) {
    for (std::string& found : checkpoint_legacy_find(path)) legacy.push_back(std::move(found));
  }
  const std::string home = home_resolve(args.home);
  std::unique_ptr<Store> store;
  if (!legacy.empty() && fs::exists(home + "/runs.db")) store = Store::open(home + "/runs.db");
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> failed;
  for (std::size_t i = 0; i < legacy.size(); ++i) {
    const std::string from = fs::absolute(legacy[i]).lexically_normal().string();
    if (!args.json) std::cerr << fmt::format("[{}/{}] {} ...\n", i + 1, legacy.size(), from);
    try {
      const std::string to = checkpoint_upgrade(registry(), from);
      std::int64_t rows = 0;
      if (store) {
        const std::uint64_t bytes = fs::file_size(to);
        rows = store->checkpoint_rename(from, to, fmt::format("crc32:{:08x}", file_crc32(to)),
                                        static_cast<std::int64_t>(bytes));
      }
      results.push_back({{"from", from}, {"to", to}, {"store_rows", rows}});
      if (!args.json)
        std::cout << fmt::format("upgraded {}\n      -> {}{}\n", from, to,
                                 rows > 0 ? fmt::format(" ({} store rows)", rows) : "");
    } catch (const UsageError& e) {
      failed.push_back(from);
      results.push_back({{"from", from}, {"error", e.what()}});
      if (!args.json) std::cerr << fmt::format("error: {}\n", e.what());
    }
  }
  if (args.json) {
    print_json({{"upgraded", legacy.size() - failed.size()}, {"failed", failed.size()}, {"checkpoints", results}});
  } else if (legacy.empty()) {
    std::cout << "no legacy checkpoints found: nothing to upgrade\n";
  } else {
    std::cout << fmt::format("{} upgraded, {} failed\n", legacy.size() - failed.size(), failed.size());
  }
  if (!failed.empty()) {
    throw UsageError(
        with_hint(fmt::format("{} checkpoint(s) could not be upgraded and were left as they were", failed.size()),
                  "the errors above name each file and the problem"));
  }
}

}  // namespace

void add_checkpoints_command(CLI::App& app) {
  CLI::App* checkpoints = app.add_subcommand("checkpoints", "Maintain checkpoint files");
  checkpoints->require_subcommand(1);
  auto args = std::make_shared<UpgradeArgs>();
  CLI::App* command = checkpoints->add_subcommand(
      "upgrade", "Convert old LibTorch-archive checkpoints (.pt) into safetensors checkpoints, in place");
  command->add_option("PATH", args->paths, "a .pt checkpoint, or a folder searched recursively (a run, a TFW_HOME)")
      ->required();
  command->add_option("--home", args->home,
                      "TFW_HOME whose store rows follow the files (default: $TFW_HOME or ./tfw-home)");
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_upgrade(*args); });
}

}  // namespace tfw::cli
