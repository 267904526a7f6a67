// `tfw fit FAMILY [--corpus NAME] [--json]`: the scaling law L(N, D) = E + A/N^alpha + B/D^beta
// of a family, fitted to its finished runs from scratch in the store (workbench/results/fit.h).
#include <iostream>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/home.h"
#include "storage/store.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"
#include "workbench/results/fit.h"

namespace tfw::cli {

namespace {

struct FitArgs {
  std::string family, corpus, home;
  std::vector<std::string> experiments;
  bool json = false;
};

void run_fit(const FitArgs& args) {
  auto store = Store::open_readonly(home_resolve(args.home) + "/runs.db");
  const results::FamilyFit f = results::family_fit(*store, args.family, args.corpus, args.experiments);
  const analysis::ScalingLaw& law = f.fit.law;
  if (args.json) {
    print_json({{"family", f.family},
                {"corpus", f.corpus},
                {"tokenizer", f.tokenizer},
                {"law", {{"E", law.E}, {"A", law.A}, {"alpha", law.alpha}, {"B", law.B}, {"beta", law.beta}}},
                {"runs", f.runs.size()},
                {"distinct_points", f.fit.distinct},
                {"rms_log_error", f.fit.rms_log_error},
                {"max_relative_error", f.fit.max_relative_error},
                {"huber_objective", f.fit.objective},
                {"method", "Huber (delta 1e-3) on log loss, BFGS from a grid of 4500 starts (Hoffmann et al. 2022)"}});
    return;
  }
  std::cout << fmt::format(
      "scaling law of {} on {} ({} tokenizer), fitted to {} finished runs from scratch ({} distinct "
      "(N, D) points):\n",
      f.family, f.corpus, f.tokenizer, f.runs.size(), f.fit.distinct);
  std::cout << fmt::format("  L(N, D) = E + A / N^alpha + B / D^beta, N parameters, D training tokens\n");
  std::cout << fmt::format("  E = {:.4f}   A = {:.4g}   alpha = {:.4f}   B = {:.4g}   beta = {:.4f}\n", law.E, law.A,
                           law.alpha, law.B, law.beta);
  std::cout << fmt::format("  fit error: {:.2f}% rms (of log loss), {:.2f}% at worst\n", 100 * f.fit.rms_log_error,
                           100 * f.fit.max_relative_error);
  std::cout
      << "  method: Huber loss (delta 1e-3) on log loss, BFGS from a grid of 4,500 starts (Hoffmann et al. 2022)\n";
  std::cout << "  the law knows nothing of growth: it predicts runs from scratch\n";
}

}  // namespace

void add_fit_command(CLI::App& app) {
  auto args = std::make_shared<FitArgs>();
  CLI::App* command = app.add_subcommand(
      "fit", "Fit the scaling law L(N, D) = E + A/N^alpha + B/D^beta to a family's finished runs from scratch");
  command->add_option("family", args->family, "model family (tfw plugins lists them)")->required();
  command->add_option("--corpus", args->corpus, "use the runs on this corpus (needed when the runs use several)");
  command->add_option(
      "--experiment", args->experiments,
      "use only the runs of this experiment (repeatable): runs of a family may differ in more than size");
  command->add_flag("--json", args->json, "print the fit as JSON");
  add_home_option(command, args->home);
  command->callback([args] { run_fit(*args); });
}

}  // namespace tfw::cli
