// tfw: the command line users start. Loading LibTorch costs every process about a quarter of a
// second (its operators register themselves as it loads), so the commands that compute nothing
// with a model run here, in a program that does not link it: the store (runs), the engine
// service and its clients (serve, submit, jobs, cancel, watch), corpora (data), fits and
// exports. Every other line (training, growth, evaluation, --help, --version, a global option
// first) is handed unchanged to tfw-torch beside this program, which has every command.
// Exit codes: app.h.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/machine/cores.h"
#include "engine/core/process.h"
#include "workbench/cli/app.h"
#include "workbench/cli/commands.h"

namespace {

// Whether this program runs the line itself: its first word, with no option before it, is one
// of the commands registered on `app`.
bool runs_here(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return false;
  const std::string first = argv[1];
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (command->check_name(first)) return true;
  }
  return false;
}

// Replaces this process with tfw-torch, the same arguments (argv[0] kept, so that ps and
// pgrep -f see the line as typed). Returns only when it cannot start: exit code 1.
int hand_over(char** argv) {
  const std::string torch = (std::filesystem::path(tfw::self_executable()).parent_path() / "tfw-torch").string();
  tfw::process_become(torch, argv);
  std::cerr << "tfw: cannot start " << torch << " (" << std::strerror(errno)
            << "): it runs the commands that load LibTorch, and is built beside tfw\n"
               "  hint: build it again (ninja -C BUILD tfw builds both), or reinstall tfw\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  tfw::cli::close_inherited_descriptors_when_serving(argc, argv);
  CLI::App app{tfw::cli::kAppDescription, "tfw"};
  app.require_subcommand(1);
  tfw::cli::add_runs_command(app);
  tfw::cli::add_data_command(app);
  tfw::cli::add_export_command(app);
  tfw::cli::add_fit_command(app);
  tfw::cli::add_serve_command(app);
  tfw::cli::add_remote_commands(app);  // submit, jobs, cancel, watch
  if (!runs_here(app, argc, argv)) return hand_over(argv);
  std::string note;  // tfw serve splits this count; say where OMP_NUM_THREADS was not usable
  tfw::threads_default(&note);
  if (!note.empty()) std::cerr << "tfw: " << note << "\n";
  return tfw::cli::app_run(app, argc, argv);
}
