// `tfw serve [--listen ADDR:PORT] [--token-file FILE] [--jobs N] [--home DIR]`: the engine
// service (workbench/service/server.h, docs/service.md). SIGINT/SIGTERM stop it: running
// jobs checkpoint and stay queued for the next start.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "engine/config/growth_script.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "workbench/cli/commands.h"
#include "workbench/service/server.h"

namespace tfw::cli {

namespace {

// Growth scripts are code: the service and its jobs run none a client names, except those
// inside the one folder its operator allows (engine/config/growth_script.h). The setting is
// this process's environment, which the jobs inherit; one from the caller's shell is dropped.
std::string allow_growth_scripts(const std::string& folder, const std::string& home) {
  if (folder.empty()) {
    ::unsetenv(kGrowthScriptsVariable);
    return "";
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    throw UsageError(with_hint(fmt::format("--allow-growth-scripts {}: not a folder", folder),
                               "give the folder that holds the growth scripts jobs may run"));
  }
  const std::string canonical = std::filesystem::canonical(folder, ec).string();
  // Clients write files into TFW_HOME (a job's run.toml is their text): a folder that holds it,
  // or lies in it, would let them name a script they wrote.
  if (path_inside(home, canonical) || path_inside(canonical, home)) {
    throw UsageError(with_hint(fmt::format("--allow-growth-scripts {}: it overlaps TFW_HOME ({}), where clients write "
                                           "files, so a client could write the script it names",
                                           canonical, home),
                               "keep the allowed scripts in a folder of their own, outside TFW_HOME"));
  }
  ::setenv(kGrowthScriptsVariable, canonical.c_str(), 1);
  return canonical;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto options = std::make_shared<service::ServiceOptions>();
  auto scripts = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("serve", "The engine service: a job queue and live metric streams over TCP");
  command->add_option("--listen", options->listen, "ADDR:PORT to listen on (default 127.0.0.1:7433; port 0: any free)");
  command->add_option("--token-file", options->token_file,
                      "a file holding the secret every client must present (required off loopback)");
  command->add_option("--jobs", options->jobs, "jobs run at once (default 1; the default thread count is split)")
      ->check(CLI::PositiveNumber);
  add_home_option(command, options->home);
  command->add_option("--idle-timeout", options->idle_timeout, "seconds a client may stay silent (default 300)")
      ->check(CLI::PositiveNumber);
  command->add_option("--allow-growth-scripts", *scripts,
                      "run growth scripts (method = \"script\") that lie inside this folder; without it, a "
                      "submission naming one is refused");
  command->callback([options, scripts] {
    options->home = home_resolve(options->home);
    const std::string allowed = allow_growth_scripts(*scripts, options->home);
    // SIGINT/SIGTERM: the handler only writes to a pipe; a waiting thread stops the service.
    // (A handler rather than a blocked mask: torch's thread pool exists before this point.)
    static int wake[2] = {-1, -1};
    if (pipe(wake) != 0) throw Error("cannot create a pipe");
    struct sigaction action {};
    action.sa_handler = [](int signal) {
      const char byte = static_cast<char>(signal);
      [[maybe_unused]] ssize_t n = write(wake[1], &byte, 1);
    };
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    service::Service server(*options);
    fmt::print("tfw serve: listening on {} (TFW_HOME {}, {} job slot{}{}{})\n", server.address(), options->home,
               options->jobs, options->jobs == 1 ? "" : "s", options->token_file.empty() ? "" : ", token required",
               allowed.empty() ? "" : ", growth scripts from " + allowed);
    std::fflush(stdout);
    std::thread waiter([&server] {
      char byte = 0;
      while (read(wake[0], &byte, 1) < 0 && errno == EINTR) {}
      server.stop();
    });
    server.run();
    const char done = 0;
    [[maybe_unused]] ssize_t n = write(wake[1], &done, 1);  // wake the waiter if the service stopped by itself
    waiter.join();
    fmt::print(stderr, "tfw serve: stopped; interrupted jobs resume at the next start\n");
  });
}

}  // namespace tfw::cli
