// `tfw sample`: text from a language-model checkpoint, a token at a time, streamed as it is
// generated and deterministic for a seed (docs/cli.md, `tfw sample`). Torch-free header.
//
// Each step samples the next token from the logits of the last position: greedily at
// temperature 0, else from softmax(logits / temperature) restricted to the top_k most likely
// tokens (0: all), with a generator seeded by `seed`. The model reads at most its context
// (seq_len, S) tokens: when the text reaches S tokens since the context last started, the
// context restarts at the last S/2 tokens ("a refill"). With the key/value cache (the
// default, for families that have one: engine/nn/model.h) a step feeds one token and attends
// to the cached keys and values, so its time does not grow with the text; a refill
// recomputes the S/2 tokens once. Without it every step recomputes the whole context; both
// read the same context, so they give the same text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tfw {

class Registry;

struct SampleRequest {
  std::string checkpoint;
  std::string home;  // TFW_HOME: a tokenizer.json the checkpoint names is read only inside it
  std::string prompt;
  std::int64_t tokens = 200;  // to generate
  double temperature = 1.0;   // 0: greedy
  std::int64_t top_k = 0;     // 0: every token
  std::uint64_t seed = 0;
  bool cache = true;  // false: recompute the context every step (for comparison)
};

struct SampleStats {
  std::int64_t prompt_tokens = 0, generated = 0, refills = 0;
  bool cached = false;               // the key/value cache was used
  double prefill_seconds = 0;        // the prompt's forward
  std::vector<double> step_seconds;  // each generated token: forward and sampling
};

// Calls `on_text` with the text of each generated token as soon as it is sampled. Throws
// UsageError for an empty prompt, a negative count or temperature, or a checkpoint whose
// family is unknown.
SampleStats sample_checkpoint(const Registry& registry, const SampleRequest& request,
                              const std::function<void(const std::string& text)>& on_text);

}  // namespace tfw
