// `tfw grow --method NAME --from CHECKPOINT --to CONFIG.toml --out DIR [--check]`: grow a
// checkpoint's model offline into a new checkpoint; `tfw train --init-from` starts a run from
// it, recorded as a child of the source run.
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/config/growth_script.h"
#include "engine/core/error.h"
#include "engine/commands/grow_offline.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "runner/lineage.h"
#include "storage/store.h"
#include "workbench/service/client.h"
#include "workbench/service/remote_book.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace tfw::cli {

namespace {

namespace fs = std::filesystem;

struct GrowArgs {
  GrowRequest request;
  std::string from_run;               // EXPERIMENT/RUN: its last checkpoint, found when the command runs
  std::string record_to, token_file;  // the store to find it in is a service's
  std::vector<std::string> options;
  std::string script;  // --script: the script of --method script
  bool json = false;
};

void run_grow(GrowArgs& args) {
  GrowRequest& request = args.request;
  // Options are --option key=value (TOML values), checked by the method's plan().
  config_apply_overrides(request.options, args.options);
  if (!args.script.empty() || request.method == kScriptGrowthMethod) {
    if (request.method != kScriptGrowthMethod) {
      throw UsageError(with_hint(fmt::format("--script runs with --method script, not --method {}", request.method),
                                 "tfw grow --method script --script grow.py ..."));
    }
    // The script by absolute path and content, as the grown checkpoint's lineage records it.
    if (!args.script.empty()) request.options.insert_or_assign("script", args.script);
    growth_script_pin(request.options, fs::current_path().string());
  }
  const std::string store_path = home_resolve(request.home) + "/runs.db";
  if (args.from_run.empty() == request.from_checkpoint.empty()) {
    throw UsageError(with_hint("tfw grow needs one of --from CHECKPOINT and --from-run EXPERIMENT/RUN",
                               "--from names a checkpoint file; --from-run takes a run's last checkpoint"));
  }
  const auto [record_to, token_file] = service::record_target(args.record_to, args.token_file);
  if (!args.from_run.empty()) {
    // A batch on a cluster submits a stage before its parent has trained: the parent's last
    // checkpoint is looked up now, when the stage runs, in the store the runs record to.
    const std::size_t slash = args.from_run.find('/');
    if (slash == std::string::npos || (record_to.empty() && !fs::exists(store_path))) {
      throw UsageError(with_hint(fmt::format("--from-run {}: expected EXPERIMENT/RUN of the store in {}", args.from_run,
                                             record_to.empty() ? store_path : "the service at " + record_to),
                                 "e.g. --from-run e4-growth-methods/tokenformer-small"));
    }
    const std::string experiment = args.from_run.substr(0, slash), name = args.from_run.substr(slash + 1);
    std::int64_t parent = 0;
    if (!record_to.empty()) {
      service::Client client(record_to, token_file);
      const nlohmann::json reply =
          client.request({{"type", "record_last_checkpoint"}, {"experiment", experiment}, {"name", name}});
      request.from_checkpoint = reply.value("checkpoint", "");
      parent = reply.value("run", std::int64_t{0});
    } else {
      auto store = Store::open_readonly(store_path);
      const std::optional<RunRecord> record = store->run_in_experiment(experiment, name);
      request.from_checkpoint = record ? runner::last_checkpoint(*store, record->id) : "";
      parent = record ? record->id : 0;
    }
    if (request.from_checkpoint.empty()) {
      throw UsageError(with_hint(fmt::format("--from-run {}: {} (in {})", args.from_run,
                                             parent != 0 ? "the run has no checkpoint yet" : "no such run",
                                             record_to.empty() ? store_path : "the service at " + record_to),
                                 "train it first; `tfw runs list --experiment EXPERIMENT` shows what there is"));
    }
    request.parent_run = parent;
  } else {
    // A checkpoint file, a run folder or a run's name: its last checkpoint (as tfw eval takes).
    request.from_checkpoint = runner::checkpoint_of(request.from_checkpoint, home_resolve(request.home));
  }
  if (args.from_run.empty() && fs::exists(store_path)) {  // the grown checkpoint names the run it came from
    auto store = Store::open_readonly(store_path);
    request.parent_run = runner::checkpoint_owner(*store, request.from_checkpoint).value_or(0);
  }
  GrowResult result = grow_checkpoint(registry(), request);
  if (args.json) {
    nlohmann::json json = {
        {"checkpoint", result.checkpoint},
        {"method", request.method},
        // A script declares its exactness as it runs (and an exact claim is checked then).
        {"declared_exact",
         request.method == kScriptGrowthMethod ? nlohmann::json(nullptr) : nlohmann::json(result.plan.exact)},
        {"changes", result.plan.changes},
        {"parameters_before", result.parameters_before},
        {"parameters_after", result.parameters_after},
        {"inherited_flops", result.inherited_flops},
        {"parent_run", request.parent_run == 0 ? nlohmann::json(nullptr) : nlohmann::json(request.parent_run)}};
    if (result.checked) {
      json["max_abs_logit_diff"] = result.max_abs_logit_diff;
      json["loss_before"] = result.loss_before;
      json["loss_after"] = result.loss_after;
    }
    print_json(json);
    return;
  }
  std::cout << fmt::format("{}: {} -> {} parameters ({})\n", request.method, grouped(result.parameters_before),
                           grouped(result.parameters_after),
                           request.method == kScriptGrowthMethod ? "exactness as the script declared it, above"
                           : result.plan.exact                   ? "declared exact"
                                                                 : "not exact");
  for (const std::string& change : result.plan.changes) std::cout << "  " << change << "\n";
  if (result.checked) {
    std::cout << fmt::format(
        "  check on validation text: max |logit difference| {:.3e} (declared {}), loss {:.4f} "
        "-> {:.4f}\n",
        result.max_abs_logit_diff,
        request.method == kScriptGrowthMethod ? "by the script, above"
        : result.plan.exact                   ? "exact"
                                              : "not exact",
        result.loss_before, result.loss_after);
  }
  // The target's --set overrides go with it: the checkpoint holds the overridden model.
  std::string overrides;
  for (const std::string& o : request.to_overrides) overrides += " --set '" + o + "'";
  std::cout << fmt::format("  wrote {}\n  continue training with: tfw train {}{} --init-from {}\n", result.checkpoint,
                           request.to_config, overrides, result.checkpoint);
}

}  // namespace

void add_grow_command(CLI::App& app) {
  auto args = std::make_shared<GrowArgs>();
  CLI::App* command = app.add_subcommand("grow", "Grow a checkpoint's model with a growth method");
  command
      ->add_option("--method", args->request.method,
                   "pattention_grow, net2net, hypercloning, ... (tfw plugins); script: a Python script (--script)")
      ->required();
  command->add_option("--script", args->script,
                      "with --method script: the growth script to run (docs/growth.md, \"Growth by script\")");
  command->add_option("--from", args->request.from_checkpoint,
                      "the checkpoint to grow: a .safetensors file, or a run (folder or name) for its last checkpoint");
  command->add_option("--record-to", args->record_to,
                      "with --from-run: find the run in the store of this `tfw serve` (default: $TFW_RECORD_TO)");
  command->add_option("--token-file", args->token_file, "with --record-to: the service's token file");
  command->add_option("--from-run", args->from_run,
                      "EXPERIMENT/RUN: grow that run's last checkpoint (looked up when the command runs)");
  command->add_option("--to", args->request.to_config, "run config with the target [model] (and [data] for --check)")
      ->required();
  command->add_option("--out", args->request.out_dir, "folder for the grown checkpoint")->required();
  command->add_option("--set", args->request.to_overrides, "override a key of the target config")
      ->allow_extra_args(false);
  command->add_option("--option", args->options, "a growth option, e.g. --option key_init=zero")
      ->allow_extra_args(false);
  command->add_option("--seed", args->request.seed, "seed of new weights and noise");
  command->add_flag("--check", args->request.check,
                    "measure the largest logit difference and the losses on validation text");
  add_home_option(command, args->request.home);
  command->add_flag("--json", args->json, "print JSON (keys in docs/cli.md)");
  command->callback([args] { run_grow(*args); });
}

}  // namespace tfw::cli
