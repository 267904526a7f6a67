// `tfw eval`: a checkpoint's loss on the validation text of any corpus (docs/cli.md, `tfw
// eval`); an image classifier's loss and accuracy on its run's whole validation split
// (docs/design/VISION.md). The model is rebuilt from the config the checkpoint holds.
// Torch-free header.
//
// Windows (T + 1 tokens; the loss of predicting tokens 1..T from 0..T-1):
// - "even" (default): N windows spread evenly over the corpus's validation shard, window w
//   starting at floor(span · w / (N - 1)) with span = tokens - T - 1, the same windows the
//   trainer's own evaluation reads (train.batch_size × train.eval_batches of them). They are
//   evaluated in batches of train.batch_size (with train.grad_accum = "auto", of the
//   micro-batch the run trained with), so on the run's corpus the loss is the trainer's
//   val/loss.
// - "stride:S" (`--stride S`): the whole validation text, windows starting at 0, S, 2S, ...;
//   the first window scores all T targets, each later one only its last S (the targets the
//   previous windows did not score), and a last window ending at the text's end scores what
//   is left. Every target token of the text is scored once, with at least T - S tokens of
//   context (except at the start).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/mask_use.h"

namespace tfw {

class Registry;

struct EvalRequest {
  std::string home;                  // TFW_HOME: prepared data
  std::string checkpoint;            // the checkpoint file (.safetensors)
  std::vector<std::string> corpora;  // built-in names or paths; empty: the checkpoint's own corpus
  std::int64_t windows = 0;          // even windows (0: train.batch_size × train.eval_batches)
  std::int64_t seq_len = 0;          // T (0: the run's)
  std::int64_t stride = 0;           // > 0: strided windows over the whole text
  std::size_t cloze = 0;             // > 0: also this many cloze passages (engine/data/cloze.h)
  std::string cloze_list;            // write the passages here (TSV), when set
  // Parameter blocks (train.mask) to evaluate with: unset, the checkpoint's own train.mask.use;
  // empty, every token.
  std::optional<std::vector<std::string>> blocks;
  // Where to evaluate: "cpu", "cuda" or "cuda:N"; empty: the checkpoint's train.device.
  // Checkpoints are device-free, so a run trained on a GPU evaluates on the CPU.
  std::string device;
};

struct EvalResult {
  std::string corpus;        // as named (a path's file name); an image dataset's name
  std::string shard_dir;     // the prepared shards read
  std::string mode;          // "even" or "stride:S"; an image classifier's split: "test" or "tuning"
  std::int64_t windows = 0;  // windows; an image classifier's images
  std::int64_t tokens = 0;   // target tokens scored
  double loss = 0;           // mean cross-entropy per target token, nats
  double perplexity = 0, bits_per_token = 0;
  double bytes = 0;          // bytes of text the scored tokens decode to
  double bits_per_byte = 0;  // loss · tokens / (ln 2 · bytes)
  double accuracy = -1;      // an image classifier's share of images classified right (-1: a language model)
  // Cloze (when asked): passages found, those whose target the model completes greedily,
  // exactly (every target token is the argmax given the context and the target's earlier
  // tokens: what greedy decoding would produce), and the mean over passages of the target's
  // log-likelihood (nats, summed over its tokens).
  std::int64_t cloze_items = 0, cloze_correct = 0, cloze_tokens = 0;
  double cloze_accuracy = 0, cloze_logprob = 0;
};

struct EvalReport {
  std::string checkpoint, family, model, tokenizer;
  std::string task = "language_model";  // engine/plugin/task.h
  std::string blocks;                   // the parameter blocks used ("gcide+shared"; "" when unmasked), and how
  std::string mask_description;
  std::vector<MaskLayerUse> mask_layers;  // each Pattention's tokens in use, when a mask is applied
  std::int64_t step = 0, seq_len = 0;
  std::vector<EvalResult> results;
};

// Throws UsageError for a checkpoint of a family no plugin provides, a corpus that cannot
// be found or prepared, a text shorter than one window, a tokenizer other than the model's,
// or a window longer than the model's context.
EvalReport evaluate_checkpoint(const Registry& registry, const EvalRequest& request,
                               const std::function<void(const std::string&)>& on_message = {});

}  // namespace tfw
