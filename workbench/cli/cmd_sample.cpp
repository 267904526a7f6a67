// `tfw sample RUN|CHECKPOINT --prompt TEXT [--tokens N] [--temperature T] [--top-k K]
// [--seed S] [--no-cache]`: text from a language model, streamed to stdout as it is
// generated (engine/commands/sample.h); the timing goes to stderr.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "engine/commands/sample.h"
#include "runner/lineage.h"
#include "workbench/cli/commands.h"

namespace tfw::cli {

namespace {

struct SampleArgs {
  std::string target, home;
  SampleRequest request;
  bool no_cache = false, quiet = false;
};

double median_ms(std::vector<double> seconds) {
  if (seconds.empty()) return 0;
  std::sort(seconds.begin(), seconds.end());
  return 1e3 * seconds[seconds.size() / 2];
}

void run_sample(SampleArgs& args) {
  SampleRequest& request = args.request;
  request.checkpoint = runner::checkpoint_of(args.target, home_resolve(args.home));
  request.home = home_resolve(args.home);
  request.cache = !args.no_cache;
  // The prompt is echoed once the model has loaded, so that an error (an image classifier's
  // checkpoint, a bad option) is not preceded by it.
  bool echoed = false;
  const SampleStats stats = sample_checkpoint(registry(), request, [&](const std::string& text) {
    if (!echoed) std::cout << request.prompt;
    echoed = true;
    std::cout << text << std::flush;
  });
  if (!echoed) std::cout << request.prompt;
  std::cout << "\n";
  if (args.quiet) return;
  // Time per token early and late in the text: the median of the first and the last tenth.
  const std::size_t n = stats.step_seconds.size(), tenth = std::max<std::size_t>(1, n / 10);
  const std::vector<double> first(stats.step_seconds.begin(),
                                  stats.step_seconds.begin() + static_cast<std::ptrdiff_t>(std::min(n, tenth)));
  const std::vector<double> last(stats.step_seconds.end() - static_cast<std::ptrdiff_t>(std::min(n, tenth)),
                                 stats.step_seconds.end());
  double total = stats.prefill_seconds;
  for (double s : stats.step_seconds) total += s;
  std::cerr << fmt::format(
      "{} tokens after a {}-token prompt in {:.2f} s ({}): prompt {:.1f} ms, then {:.2f} ms a token "
      "over the first tenth and {:.2f} ms over the last (medians); {} context restart{}\n",
      stats.generated, stats.prompt_tokens, total,
      stats.cached ? "key/value cache" : "no cache: the context is recomputed every token", 1e3 * stats.prefill_seconds,
      median_ms(first), median_ms(last), stats.refills, stats.refills == 1 ? "" : "s");
}

}  // namespace

void add_sample_command(CLI::App& app) {
  auto args = std::make_shared<SampleArgs>();
  CLI::App* command = app.add_subcommand("sample", "Generate text from a checkpoint, streamed as it is generated");
  add_checkpoint_target(command, args->target);
  command->add_option("--prompt", args->request.prompt, "the text to continue")->required();
  command->add_option("--tokens", args->request.tokens, "tokens to generate (default 200)");
  command->add_option("--temperature", args->request.temperature, "softmax temperature (default 1; 0: greedy)");
  command->add_option("--top-k", args->request.top_k, "sample among the K most likely tokens (default 0: all)");
  command->add_option("--seed", args->request.seed, "the sampling seed: the same seed gives the same text (default 0)");
  command->add_flag("--no-cache", args->no_cache, "recompute the whole context every token (to compare timings)");
  command->add_flag("--quiet", args->quiet, "no timing line on stderr");
  add_home_option(command, args->home);
  command->callback([args] { run_sample(*args); });
}

}  // namespace tfw::cli
