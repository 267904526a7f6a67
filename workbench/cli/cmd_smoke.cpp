// `tfw smoke CONFIG...`: build each model and take a few AdamW steps on one fixed random
// batch; the loss must fall. A quick check that a config builds, runs and trains.
#include <iostream>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/commands/smoke.h"
#include "engine/plugin/task.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

struct SmokeArgs {
  std::vector<std::string> configs;
  std::vector<std::string> overrides;
  SmokeOptions options;
  bool json = false;
};

void run_smoke(const SmokeArgs& args) {
  nlohmann::json results = nlohmann::json::array();
  bool all_fell = true;
  for (const std::string& path : args.configs) {
    ModelConfig config = model_config_load(registry(), path, args.overrides);
    SmokeResult result = model_smoke(registry(), config, args.options);
    const bool fell = result.losses.back() < result.losses.front();
    all_fell = all_fell && fell;
    results.push_back({{"config", config.path},
                       {"name", config.name},
                       {"family", config.family},
                       {"parameters", result.parameters},
                       {"losses", result.losses},
                       {"seconds", result.seconds},
                       {"tokens_per_second", result.tokens_per_second},
                       {"loss_fell", fell}});
    if (!args.json) {
      // An image classifier reads its own tokens per image, not --seq-len.
      const bool images = registry().family(config.family).task() == kImageClassificationTask;
      std::cout << fmt::format("{} ({}): {} parameters, {} steps of B={} {}\n", config.name, config.family,
                               grouped(result.parameters), args.options.steps, args.options.batch,
                               images ? fmt::format("random images of {} tokens", config.spec->shape().seq_len)
                                      : fmt::format("T={}", args.options.seq_len));
      std::cout << fmt::format("  loss {:.4f} -> {:.4f} ({}), {:.0f} tokens/s\n", result.losses.front(),
                               result.losses.back(), fell ? "falls" : "DOES NOT FALL", result.tokens_per_second);
    }
  }
  if (args.json) print_json(results);
  if (!all_fell) throw Error("smoke: the loss did not fall for every config (see above)");
}

}  // namespace

void add_smoke_command(CLI::App& app) {
  auto args = std::make_shared<SmokeArgs>();
  CLI::App* command = app.add_subcommand("smoke", "Forward/backward smoke: a few AdamW steps on a fixed batch");
  command->add_option("configs", args->configs, "one or more model config TOML files")->required();
  command->add_option("--set", args->overrides, "override a key in every config")->allow_extra_args(false);
  command->add_option("--steps", args->options.steps, "optimiser steps")->check(CLI::Range(2, 1000));
  command->add_option("--batch", args->options.batch, "sequences per batch")->check(CLI::PositiveNumber);
  command->add_option("--seq-len", args->options.seq_len, "tokens per sequence")->check(CLI::PositiveNumber);
  command->add_option("--lr", args->options.lr, "AdamW learning rate")->check(CLI::PositiveNumber);
  command->add_option("--seed", args->options.seed, "initialisation and batch seed");
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_smoke(*args); });
}

}  // namespace tfw::cli
