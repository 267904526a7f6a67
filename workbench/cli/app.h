// What the two programs of the command line share (docs/design/ARCHITECTURE.md, "the command
// line"): `tfw`, which runs the commands that compute nothing with a model without loading
// LibTorch (front.cpp), and `tfw-torch`, which runs every command (main.cpp).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace tfw::cli {

// The app's description, the first line of `tfw --help`.
inline constexpr const char* kAppDescription =
    "tfw: Tokenformer Workbench. Train, grow, record and compare Tokenformer and Transformer language models.";

// The first word that is not an option or its value: the command ("" where there is none).
std::string command_of(int argc, char** argv);

// Whether --threads was given, anywhere on the line: then OMP_NUM_THREADS chooses nothing.
bool threads_given(int argc, char** argv);

// A service runs for days: it keeps no descriptor it was handed beyond stdin, stdout and
// stderr (a test runner's log, a shell's file), which would otherwise stay open, and show as
// "(deleted)" once replaced, for its whole life. Called before anything of tfw opens a file.
void close_inherited_descriptors_when_serving(int argc, char** argv);

// Parses the line and runs its command; the exit code: 0 success, 1 runtime failure, 2 usage
// or configuration error (the message names the file, key and fix), 130 stopped by Ctrl-C.
int app_run(CLI::App& app, int argc, char** argv);

}  // namespace tfw::cli
