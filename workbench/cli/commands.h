// The subcommands of `tfw`, one file each. Each add_*_command registers itself on the app;
// its callback throws tfw::UsageError (exit 2) or tfw::Error (exit 1) on failure.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tfw::cli {

void add_params_command(CLI::App& app);
void add_flops_command(CLI::App& app);
void add_plugins_command(CLI::App& app);
void add_smoke_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_runs_command(CLI::App& app);
void add_grow_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_fit_command(CLI::App& app);
void add_attention_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_sample_command(CLI::App& app);
void add_import_command(CLI::App& app);  // tokenformer, safetensors
void add_export_model_command(CLI::App& app);
void add_checkpoints_command(CLI::App& app);
void add_gui_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_remote_commands(CLI::App& app);  // submit, jobs, cancel, watch

// `tfw jobs --slurm` and `tfw cancel --slurm` (cmd_cluster.cpp).
void cluster_jobs_print(const std::string& home, const std::string& experiment, bool json);
void cluster_cancel(const std::string& home, const std::string& target, bool json);

// --home, with the one help text every command gives it.
inline CLI::Option* add_home_option(CLI::App* command, std::string& home) {
  return command->add_option("--home", home, "TFW_HOME (default: $TFW_HOME, else ./tfw-home)");
}

// --home and --bundle of a command that reads its runs from either (bundle_or_home in
// bundle_home.h), with the one help text both get.
inline void add_home_or_bundle_options(CLI::App* command, std::string& home, std::vector<std::string>& bundles) {
  add_home_option(command, home);
  command->add_option("--bundle", bundles, "read the runs from this bundle (tfw runs export); repeatable");
}

// The checkpoint a command reads (eval, sample, export-model), with the one help text all give
// it; resolved by runner::checkpoint_of.
inline void add_checkpoint_target(CLI::App* command, std::string& target) {
  command->add_option("target", target, "a run (id, name or folder), a checkpoint .safetensors, or a `tfw grow` folder")
      ->required();
}

// Thrown by a command that stopped early on request (Ctrl-C): exit code 130.
struct Interrupted {};

}  // namespace tfw::cli
