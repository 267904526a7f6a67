// `tfw import tokenformer DIR --out CHECKPOINT_DIR [--config FILE]... [--weights FILE]
// [--tokenizer FILE]`: an official TokenFormer release as a workbench checkpoint with the same
// function (engine/interop/import.h, docs/import.md).
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/interop/import.h"
#include "engine/interop/model_export.h"
#include "engine/plugin/registry.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw {
// `tfw import tokenformer --json`: every field of the result under its own name (docs/cli.md).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ImportResult, checkpoint, config, tokenizer, model, parameters, tensors, ignored,
                                   notes)
}  // namespace tfw

namespace tfw::cli {

namespace {

struct ImportArgs {
  ImportRequest request;
  bool json = false;
};

struct SafetensorsArgs {
  std::string dir, out;
  bool json = false;
};

void run_import_safetensors(const SafetensorsArgs& args) {
  const ImportResult result = import_safetensors(registry(), args.dir, args.out);
  if (args.json) {
    print_json({{"checkpoint", result.checkpoint},
                {"config", result.config},
                {"model", result.model},
                {"parameters", result.parameters},
                {"tensors", result.tensors}});
    return;
  }
  std::cout << fmt::format("imported {} tensors: {} ({} parameters)\ncheckpoint {}\nrun config {}\n", result.tensors,
                           result.model, grouped(result.parameters), result.checkpoint, result.config);
  std::cout << fmt::format("next: tfw eval {}   or   tfw sample {} --prompt \"...\"\n", result.checkpoint,
                           result.checkpoint);
}

void run_import(const ImportArgs& args) {
  std::cerr << fmt::format("importing {} ...\n", args.request.dir);
  const ImportResult result = import_tokenformer(registry(), args.request);
  if (args.json) {
    print_json(result);
    return;
  }
  std::cout << fmt::format("imported {} tensors: tokenformer {} ({} parameters)\n", result.tensors, result.model,
                           grouped(result.parameters));
  for (const std::string& note : result.notes) std::cout << "  " << note << "\n";
  for (const std::string& key : result.ignored) std::cout << "  not needed: " << key << "\n";
  std::cout << fmt::format("checkpoint {}\nrun config {}\ntokenizer  {}\n", result.checkpoint, result.config,
                           result.tokenizer);
  std::cout << fmt::format("next: tfw eval {} --corpus jargon   or   tfw attention {} --text \"...\"\n",
                           result.checkpoint, result.checkpoint);
}

}  // namespace

void add_import_command(CLI::App& app) {
  CLI::App* import = app.add_subcommand("import", "Import a model released elsewhere as a workbench checkpoint");
  import->require_subcommand(1);
  auto args = std::make_shared<ImportArgs>();
  CLI::App* command = import->add_subcommand(
      "tokenformer", "An official TokenFormer release (Haiyang-W/TokenFormer): weights, NeoX config, tokenizer.json");
  command->add_option("DIR", args->request.dir, "the release folder (pytorch_model.bin, tokenizer.json, config)")
      ->required();
  command->add_option("--out", args->request.out_dir, "folder for the checkpoint, its run config and tokenizer")
      ->required();
  command->add_option("--config", args->request.configs,
                      "the NeoX config (e.g. configs/tokenformer/150M_eval.yml); repeat to merge, later ones win");
  command->add_option("--weights", args->request.weights, "the weights (default: DIR/pytorch_model.bin)");
  command->add_option("--tokenizer", args->request.tokenizer, "the tokenizer.json (default: DIR/tokenizer.json)");
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_import(*args); });

  auto from = std::make_shared<SafetensorsArgs>();
  CLI::App* safetensors = import->add_subcommand(
      "safetensors", "A folder `tfw export-model` wrote (model.safetensors, config.json), back as a checkpoint");
  safetensors->add_option("DIR", from->dir, "the folder with config.json and model.safetensors")->required();
  safetensors->add_option("--out", from->out, "folder for the checkpoint and its run config")->required();
  safetensors->add_flag("--json", from->json, "print JSON (keys in docs/cli.md)");
  safetensors->callback([from] { run_import_safetensors(*from); });
}

}  // namespace tfw::cli
