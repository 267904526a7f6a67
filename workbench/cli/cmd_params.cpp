// `tfw params CONFIG`: parameter count and the FLOPs-per-token breakdown of
// docs/design/TOKENFORMER.md §5 (token-parameter, token-token, embedding) at the config's seq_len.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "engine/data/tokenizer.h"
#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/plugin/task.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

struct ParamsArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::int64_t seq_len = 0;
  bool json = false;
};

nlohmann::json flops_json(const FlopsPerToken& flops) {
  return {{"seq_len", flops.seq_len},
          {"token_parameter", flops.token_parameter},
          {"token_token", flops.token_token},
          {"embedding", flops.embedding},
          {"forward", flops.forward()},
          {"training", flops.training()},
          {"per_example", flops.per_example},
          {"forward_per_example", flops.forward_per_example()},
          {"training_per_example", flops.training_per_example()}};
}

// A language model's vocabulary past its tokenizer's (padded for the output matmul's shape): those
// ids get no probability (engine/train/lm_loss.h), so their parameters and logit FLOPs do
// nothing. Zero when the vocabulary is the tokenizer's, or the config names no usable tokenizer.
struct Padding {
  std::string tokenizer;
  std::int64_t tokenizer_vocab = 0, ids = 0, parameters = 0, flops_per_token = 0;
};

Padding padding_of(const ParamsArgs& args, const ModelSpec& spec, const std::string& family) {
  Padding padding;
  if (registry().family(family).task() == kImageClassificationTask) return padding;
  try {
    // Only a tokenizer the config (or --set) names: a model config alone says nothing of its data.
    bool named = std::any_of(args.overrides.begin(), args.overrides.end(),
                             [](const std::string& o) { return o.rfind("data.tokenizer=", 0) == 0; });
    const toml::table file = toml::parse_file(args.config);
    named = named || file["data"]["tokenizer"].is_string();
    if (!named) return padding;
    const RunConfig run = run_config_load(registry(), args.config, args.overrides);
    padding.tokenizer = run.data.tokenizer;
    padding.tokenizer_vocab = tokenizer_create(run.data.tokenizer)->vocab_size();
  } catch (const std::exception&) {
    return Padding{};  // not a run config, or its tokenizer's files are absent: nothing to say
  }
  const ModelShape shape = spec.shape();
  padding.ids = std::max<std::int64_t>(0, shape.vocab - padding.tokenizer_vocab);
  padding.parameters = padding.ids * shape.d;
  padding.flops_per_token = 2 * padding.ids * shape.d;  // the logits' 2·V·d, for the padded ids
  return padding;
}

void run_params(const ParamsArgs& args) {
  ModelConfig config = model_config_load(registry(), args.config, args.overrides);
  const ModelSpec& spec = *config.spec;
  const std::int64_t T = args.seq_len > 0 ? args.seq_len : spec.shape().seq_len;
  FlopsPerToken flops = spec.flops_per_token(T);
  const std::int64_t parameters = spec.parameter_count();
  const std::int64_t embedding = spec.embedding_parameter_count();
  const Padding padding = padding_of(args, spec, config.family);
  if (args.json) {
    print_json(
        {{"config", config.path},
         {"name", config.name},
         {"family", config.family},
         {"task", registry().family(config.family).task()},
         {"model", spec.summary()},
         {"parameters", parameters},
         {"parameters_embedding", embedding},
         {"parameters_non_embedding", parameters - embedding},
         {"flops_per_token", flops_json(flops)},
         {"vocab_padding", padding.tokenizer.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json{{"tokenizer", padding.tokenizer},
                                                                      {"tokenizer_vocab", padding.tokenizer_vocab},
                                                                      {"padded_ids", padding.ids},
                                                                      {"parameters", padding.parameters},
                                                                      {"flops_per_token", padding.flops_per_token}}}});
    return;
  }
  const bool images = registry().family(config.family).task() == kImageClassificationTask;
  std::cout << fmt::format("{} ({}): {}\n", config.name, config.family, spec.summary());
  std::cout << fmt::format("  parameters            {:>16}  ({})\n", grouped(parameters), short_count(parameters));
  std::cout << fmt::format(
      images ? "    patch embedding, positions, class token, head {:>16}\n" : "    embedding (tied)    {:>16}\n",
      grouped(embedding));
  if (padding.ids > 0) {
    std::cout << fmt::format("      of which padding  {:>16}  ({} ids past the {} tokenizer's {}: no probability)\n",
                             grouped(padding.parameters), padding.ids, padding.tokenizer, padding.tokenizer_vocab);
  }
  std::cout << fmt::format("    non-embedding       {:>16}\n", grouped(parameters - embedding));
  std::cout << fmt::format("  forward FLOPs per token at T = {}:\n", T);
  std::cout << fmt::format("    token-parameter     {:>16}  (2N)\n", grouped(flops.token_parameter));
  std::cout << fmt::format("    token-token         {:>16}  (4·L·d·T)\n", grouped(flops.token_token));
  std::cout << fmt::format("    embedding (logits)  {:>16}  (2·V·d)\n", grouped(flops.embedding));
  if (padding.ids > 0) {
    std::cout << fmt::format("      of which padding  {:>16}  (2·{}·d, logits no token can take)\n",
                             grouped(padding.flops_per_token), padding.ids);
  }
  std::cout << fmt::format("    total               {:>16}\n", grouped(flops.forward()));
  std::cout << fmt::format("  training FLOPs per token (3 x forward) {}\n", grouped(flops.training()));
  if (flops.per_example > 0) {
    std::cout << fmt::format("  forward FLOPs once per image (patch embedding, head) {}\n", grouped(flops.per_example));
    std::cout << fmt::format("  training FLOPs per image (3 x (T x forward + per image)) {}\n",
                             grouped(flops.training_per_example()));
  }
}

}  // namespace

void add_params_command(CLI::App& app) {
  auto args = std::make_shared<ParamsArgs>();
  CLI::App* command = app.add_subcommand("params", "Parameter count and FLOPs per token of a model config");
  command->add_option("config", args->config, "model config TOML (e.g. experiments/paper/tokenformer-150m.toml)")
      ->required();
  command->add_option("--set", args->overrides, "override a config key, e.g. --set model.n_attn=1024")
      ->allow_extra_args(false);
  command->add_option("--seq-len", args->seq_len, "sequence length T for the FLOPs (default: the config's seq_len)")
      ->check(CLI::PositiveNumber);
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_params(*args); });
}

}  // namespace tfw::cli
