// `tfw export-model TARGET --out DIR`: a checkpoint's model as model.safetensors and
// config.json, for PyTorch and the rest of the Python ecosystem (engine/interop/model_export.h,
// docs/export-model.md). `tfw import safetensors` (cmd_import.cpp) reads it back.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/home.h"
#include "engine/interop/model_export.h"
#include "engine/plugin/registry.h"
#include "runner/lineage.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw {
// `tfw export-model --json`: every field of the result under its own name (docs/cli.md).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ModelExport, weights, config, model, parameters, tensors, step)
}  // namespace tfw

namespace tfw::cli {

namespace {

struct ExportModelArgs {
  std::string target, out, home;
  bool json = false;
};

void run_export_model(const ExportModelArgs& args) {
  const std::string checkpoint = runner::checkpoint_of(args.target, home_resolve(args.home));
  const ModelExport result = export_model(registry(), checkpoint, args.out);
  if (args.json) {
    nlohmann::json json = result;
    json["checkpoint"] = checkpoint;  // the one exported
    print_json(json);
    return;
  }
  std::cout << fmt::format("exported {} tensors of {} ({} parameters) at step {} of {}\n", result.tensors, result.model,
                           grouped(result.parameters), result.step, checkpoint);
  std::cout << fmt::format("weights {}\nconfig  {}\n", result.weights, result.config);
  std::cout << "load it in PyTorch: docs/export-model.md; back into tfw: tfw import safetensors " << args.out
            << " --out DIR\n";
}

}  // namespace

void add_export_model_command(CLI::App& app) {
  auto args = std::make_shared<ExportModelArgs>();
  CLI::App* command =
      app.add_subcommand("export-model", "A checkpoint's model as model.safetensors and config.json, for PyTorch");
  add_checkpoint_target(command, args->target);
  command->add_option("--out", args->out, "folder for model.safetensors and config.json (created)")->required();
  add_home_option(command, args->home);
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_export_model(*args); });
}

}  // namespace tfw::cli
