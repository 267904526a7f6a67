// `tfw flops CONFIG... --lengths 512,1024,...`: forward and training FLOPs per sequence
// against sequence length (paper Table 3, Figure 5).
#include <iostream>

#include <fmt/format.h>

#include "engine/commands/measure.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

struct FlopsArgs {
  std::vector<std::string> configs;
  std::vector<std::string> overrides;
  std::vector<std::int64_t> lengths{512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
  bool measure = false;
  bool json = false;
};

void run_flops(const FlopsArgs& args) {
  nlohmann::json results = nlohmann::json::array();
  for (const std::string& path : args.configs) {
    ModelConfig config = model_config_load(registry(), path, args.overrides);
    const ModelSpec& spec = *config.spec;
    nlohmann::json rows = nlohmann::json::array();
    if (!args.json) {
      std::cout << fmt::format("{} ({}): {}, {} parameters\n", config.name, config.family, spec.summary(),
                               short_count(spec.parameter_count()));
      std::cout << fmt::format("  {:>7}  {:>13}  {:>13}  {:>13}  {:>13}  {:>11}{}\n", "T", "forward/seq",
                               "training/seq", "forward/tok", "token-token", "tt share",
                               args.measure ? "   measured us/tok    GFLOP/s" : "");
    }
    for (std::int64_t T : args.lengths) {
      FlopsPerToken flops = spec.flops_per_token(T);
      const std::int64_t forward = flops.forward() * T;
      const std::int64_t training = flops.training() * T;
      const double share = static_cast<double>(flops.token_token) / static_cast<double>(flops.forward());
      ForwardTiming timing;
      if (args.measure) timing = forward_timing(registry(), config, T);
      rows.push_back({{"seq_len", T},
                      {"forward_per_sequence", forward},
                      {"training_per_sequence", training},
                      {"forward_per_token", flops.forward()},
                      {"token_parameter_per_token", flops.token_parameter},
                      {"token_token_per_token", flops.token_token},
                      {"embedding_per_token", flops.embedding},
                      {"token_token_share", share}});
      if (args.measure) {
        rows.back()["measured_seconds_per_token"] = timing.seconds_per_token;
        rows.back()["measured_flops_per_second"] = timing.flops_per_second;
      }
      if (!args.json) {
        std::cout << fmt::format("  {:>7}  {:>13}  {:>13}  {:>13}  {:>13}  {:>10.1f}%", T, scientific(forward),
                                 scientific(training), scientific(flops.forward()), scientific(flops.token_token),
                                 100.0 * share);
        if (args.measure) {
          std::cout << fmt::format("  {:>16.3f}  {:>9.1f}", 1e6 * timing.seconds_per_token,
                                   timing.flops_per_second / 1e9);
        }
        std::cout << "\n";
      }
    }
    results.push_back({{"config", config.path},
                       {"name", config.name},
                       {"family", config.family},
                       {"parameters", spec.parameter_count()},
                       {"lengths", rows}});
  }
  if (args.json) print_json(results);
}

}  // namespace

void add_flops_command(CLI::App& app) {
  auto args = std::make_shared<FlopsArgs>();
  CLI::App* command = app.add_subcommand("flops", "Forward and training FLOPs against sequence length");
  command->add_option("configs", args->configs, "one or more model config TOML files")->required();
  command->add_option("--lengths", args->lengths, "sequence lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command->add_option("--set", args->overrides, "override a key in every config, e.g. --set model.seq_len=4096")
      ->allow_extra_args(false);
  command->add_flag("--measure", args->measure,
                    "also time the forward pass per token at each length (random weights, batch 1)");
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_flops(*args); });
}

}  // namespace tfw::cli
