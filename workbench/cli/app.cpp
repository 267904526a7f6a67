#include "workbench/cli/app.h"

#include <unistd.h>

#include <exception>
#include <iostream>
#include <string>

#include "engine/core/error.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"

namespace tfw::cli {

std::string command_of(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" || arg == "--kernels") {
      ++i;
      continue;
    }
    if (arg.rfind("-", 0) != 0) return arg;
  }
  return "";
}

bool threads_given(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--threads" || std::string(argv[i]).rfind("--threads=", 0) == 0) return true;
  }
  return false;
}

void close_inherited_descriptors_when_serving(int argc, char** argv) {
  if (command_of(argc, argv) == "serve") close_range(3, ~0U, 0);
}

int app_run(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "tfw: " << e.what() << "\n  hint: run `tfw --help` or `tfw SUBCOMMAND --help`\n";
    return 2;
  } catch (const Interrupted&) {
    return 130;
  } catch (const StoreError& e) {
    std::cerr << "tfw: " << e.what() << "\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "tfw: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tfw: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tfw::cli
