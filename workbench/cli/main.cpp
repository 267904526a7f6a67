// tfw-torch: the Tokenformer Workbench command line with every command, LibTorch loaded.
// `tfw` (front.cpp) runs the commands that compute nothing with a model itself and hands every
// other line to this program, unchanged. Exit codes: app.h.
#include <chrono>
#include <cstdlib>
#include <unistd.h>
#include <thread>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/machine/cpu_load.h"
#include "engine/machine/runtime.h"
#include "engine/core/process.h"
#include "workbench/cli/app.h"
#include "workbench/cli/commands.h"

namespace {

// OpenMP reads its wait policy once, as its runtime loads (before main). A training that
// starts beside other busy processes sets a passive one for itself by starting again with
// it: a thread then sleeps at a barrier instead of spinning, which beside one busy process
// on 2 cores trained 2x faster, and changes no arithmetic. On an idle machine spinning is
// faster (about 1.6x on the tiny model), so libgomp's default stays (bench/busy_machine.sh,
// engine/machine/cpu_load.h). Any other command, or a policy the user set, is left alone.
void wait_passively_when_training(int argc, char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (tfw::cli::command_of(argc, argv) != "train") return;
  tfw::LoadMeter meter;  // a quarter of a second of the other processes' CPU use
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const double busy_cores = meter.other_cpu_share() * static_cast<double>(std::thread::hardware_concurrency());
  if (busy_cores > 0.5) tfw::process_restart_with("OMP_WAIT_POLICY", "PASSIVE", argv);  // on failure, as it is
}

}  // namespace

int main(int argc, char** argv) {
  tfw::cli::close_inherited_descriptors_when_serving(argc, argv);
  wait_passively_when_training(argc, argv);
  CLI::App app{tfw::cli::kAppDescription, "tfw"};
  app.require_subcommand(1);
  // A function: the device count is looked up only when --version is asked for.
  app.set_version_flag("--version",
                       [] { return std::string("tfw ") + TFW_VERSION + " (" + tfw::build_description() + ")"; });
  tfw::runtime_init();  // OMP_NUM_THREADS or the usable cores; --threads overrides as soon as it is parsed
  if (!tfw::runtime_threads_note().empty() && !tfw::cli::threads_given(argc, argv)) {
    std::cerr << "tfw: " << tfw::runtime_threads_note() << "\n";
  }
  app.add_option_function<int>(
         "--threads", [](const int& threads) { tfw::runtime_init(threads); },
         "torch intra-op threads (default: OMP_NUM_THREADS, else the cores this process may run on)")
      ->check(CLI::PositiveNumber);
  // Before any command runs a kernel: ATen reads the choice at its first one.
  app.add_option_function<std::string>(
         "--kernels", [](const std::string& name) { tfw::cpu_capability_choose(name); },
         "ATen's CPU kernels: avx512, avx2 or default (default: the processor's widest; "
         "a resumed run keeps its own). Other kernels round differently")
      ->type_name("NAME");

  tfw::cli::add_params_command(app);
  tfw::cli::add_flops_command(app);
  tfw::cli::add_plugins_command(app);
  tfw::cli::add_smoke_command(app);
  tfw::cli::add_data_command(app);
  tfw::cli::add_train_command(app);
  tfw::cli::add_runs_command(app);
  tfw::cli::add_grow_command(app);
  tfw::cli::add_run_command(app);
  tfw::cli::add_export_command(app);
  tfw::cli::add_report_command(app);
  tfw::cli::add_fit_command(app);
  tfw::cli::add_attention_command(app);
  tfw::cli::add_eval_command(app);
  tfw::cli::add_sample_command(app);
  tfw::cli::add_import_command(app);
  tfw::cli::add_export_model_command(app);
  tfw::cli::add_checkpoints_command(app);
  tfw::cli::add_gui_command(app);
  tfw::cli::add_serve_command(app);
  tfw::cli::add_remote_commands(app);

  return tfw::cli::app_run(app, argc, argv);
}
