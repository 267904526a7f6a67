// See sample.h. Shapes: T tokens, V vocabulary.
#include "engine/commands/sample.h"

#include <chrono>
#include <filesystem>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include "engine/nn/libtorch.h"

#include "engine/nn/attention.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/data/stored_paths.h"
#include "engine/data/tokenizer.h"
#include "engine/machine/device.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/nn/mask.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"

namespace tfw {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

SampleStats sample_checkpoint(const Registry& registry, const SampleRequest& request,
                              const std::function<void(const std::string& text)>& on_text) {
  if (request.tokens < 0) throw UsageError("--tokens takes a number >= 0");
  if (!(request.temperature >= 0)) throw UsageError("--temperature takes a number >= 0 (0: greedy)");
  if (request.top_k < 0) throw UsageError("--top-k takes a number >= 0 (0: every token)");
  const CheckpointMeta meta = checkpoint_read_meta(request.checkpoint);
  const RunConfig config = checkpoint_run_config(registry, meta, request.checkpoint);
  stored_config_check(config, home_resolve(request.home), "checkpoint " + request.checkpoint + "'s config", true,
                      std::filesystem::path(request.checkpoint).parent_path().string());
  const std::int64_t S = config.model.spec->shape().seq_len;
  const std::unique_ptr<Tokenizer> tokenizer = tokenizer_create(config.data.tokenizer);
  std::vector<std::uint32_t> prompt;
  tokenizer->encode(request.prompt, prompt);
  if (prompt.empty())
    throw UsageError(with_hint("--prompt is empty", "give the text to continue, e.g. --prompt \"In the beginning\""));
  std::shared_ptr<LanguageModel> model =
      as_language_model(registry.family(config.model.family).build(*config.model.spec, 0), "tfw sample");
  model->to(device_resolve(config.train.device.text()));
  checkpoint_load(request.checkpoint, *model, nullptr);
  mask_apply(*model, config.train.mask, config.train.mask.use);  // as the run trained: its parameter blocks
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Device device = module_device(*model);
  const Precision precision = config.train.precision;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);

  SampleStats stats;
  stats.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  std::vector<std::int64_t> text(prompt.begin(), prompt.end());
  // The context starts here; it restarts at the last S/2 tokens when it reaches S.
  std::size_t start = text.size() > static_cast<std::size_t>(S) ? text.size() - static_cast<std::size_t>(S) : 0;
  KVCache cache;
  auto run = [&](const std::vector<std::int64_t>& ids, bool incremental) {
    const torch::Tensor input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);
    const AutocastGuard autocast(precision, device);
    torch::Tensor logits = incremental || request.cache ? model->forward_cached(input, cache) : torch::Tensor();
    if (!logits.defined()) {
      stats.cached = false;
      return torch::Tensor();
    }
    return at_least_float32(logits)[0][-1];  // (V)
  };
  auto context = [&] {
    return std::vector<std::int64_t>(text.begin() + static_cast<std::ptrdiff_t>(start), text.end());
  };
  // The logits of the last position, from the cache when there is one.
  auto full = [&]() {
    cache = KVCache();
    torch::Tensor last = request.cache ? run(context(), false) : torch::Tensor();
    if (!last.defined()) {
      const torch::Tensor input = torch::tensor(context(), torch::kInt64).unsqueeze(0).to(device);
      const AutocastGuard autocast(precision, device);
      last = at_least_float32(model->forward(input))[0][-1];
    }
    return last;
  };
  stats.cached = request.cache;
  auto began = Clock::now();
  torch::Tensor logits = full();
  stats.prefill_seconds = seconds_since(began);
  for (std::int64_t i = 0; i < request.tokens; ++i) {
    began = Clock::now();
    torch::Tensor scores = logits.to(torch::kFloat64);
    // A vocabulary padded past the tokenizer's (for the matmul's shape): those ids are no text.
    if (scores.size(0) > static_cast<std::int64_t>(tokenizer->vocab_size())) {
      scores = scores.narrow(0, 0, tokenizer->vocab_size());
    }
    // Weights that are NaN or infinite (a diverged or damaged checkpoint) give scores no
    // distribution can come from: said as the checkpoint's problem, not torch's.
    if (!torch::isfinite(scores).all().item<bool>()) {
      throw UsageError(with_hint(fmt::format("checkpoint {}: its model gives scores that are not finite (NaN or "
                                             "infinite weights) at token {}",
                                             request.checkpoint, i),
                                 "sample an earlier checkpoint of the run, from before it diverged"));
    }
    std::int64_t next = 0;
    if (request.temperature == 0) {
      next = scores.argmax().item<std::int64_t>();
    } else {
      scores = scores / request.temperature;
      if (request.top_k > 0 && request.top_k < scores.size(0)) {
        const torch::Tensor kth = std::get<0>(scores.topk(request.top_k)).index({-1});
        scores = scores.masked_fill(scores < kth, -std::numeric_limits<double>::infinity());
      }
      next = torch::multinomial(torch::softmax(scores, -1).cpu(), 1, false, generator).item<std::int64_t>();
    }
    text.push_back(next);
    on_text(tokenizer->decode({static_cast<std::uint32_t>(next)}));
    stats.generated += 1;
    if (i + 1 < request.tokens) {
      if (text.size() - start >= static_cast<std::size_t>(S)) {
        start = text.size() - static_cast<std::size_t>(S / 2);  // restart the context at the last S/2 tokens
        stats.refills += 1;
        logits = full();
      } else if (stats.cached) {
        logits = run({next}, true);
      } else {
        logits = full();
      }
    }
    stats.step_seconds.push_back(seconds_since(began));
  }
  return stats;
}

}  // namespace tfw
