// See evaluate.h. Shapes: B windows per batch, T tokens per window, V vocabulary.
#include "engine/commands/evaluate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include "engine/nn/libtorch.h"

#include "engine/checkpoint/checkpoint.h"
#include "engine/data/cloze.h"
#include "engine/data/images.h"
#include "engine/data/shards.h"
#include "engine/data/stored_paths.h"
#include "engine/data/tokenizer.h"
#include "engine/machine/device.h"
#include "engine/machine/memory_check.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "engine/nn/mask.h"
#include "engine/config/run_config.h"
#include "engine/train/window_loss.h"
#include "engine/config/schedule.h"
#include "engine/train/task_data.h"
#include "engine/plugin/task.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The batch of windows starting at `starts` (B, T + 1).
torch::Tensor windows_batch(const TokenShard& shard, const std::vector<std::uint64_t>& starts, std::int64_t T) {
  torch::Tensor batch = torch::empty({static_cast<std::int64_t>(starts.size()), T + 1}, torch::kInt64);
  auto rows = batch.accessor<std::int64_t, 2>();
  for (std::size_t b = 0; b < starts.size(); ++b) {
    for (std::int64_t t = 0; t <= T; ++t)
      rows[static_cast<std::int64_t>(b)][t] = shard[starts[b] + static_cast<std::uint64_t>(t)];
  }
  return batch;
}

// Per-target losses (B, T) of a batch: the trainer's loss, unreduced.
torch::Tensor token_losses(LanguageModel& model, const torch::Tensor& batch, std::int64_t T, std::int64_t V,
                           Precision precision) {
  return loss_of(model, batch, T, V, precision, torch::kNone).reshape({-1, T});
}

// A report's heading: the checkpoint, its model and its step.
EvalReport report_of(const EvalRequest& request, const RunConfig& config, const CheckpointMeta& meta) {
  EvalReport report;
  report.checkpoint = fs::absolute(request.checkpoint).string();
  report.family = config.model.family;
  report.model = config.model.spec->summary();
  report.step = meta.step;
  return report;
}

// An image classifier's checkpoint: loss and accuracy on the whole validation split of its
// run's dataset (the test split, or the tuning split when the run used it).
EvalReport evaluate_images(const Registry& registry, const EvalRequest& request, const RunConfig& config,
                           const CheckpointMeta& meta, const std::function<void(const std::string&)>& on_message) {
  if (!request.corpora.empty() || request.windows > 0 || request.seq_len > 0 || request.stride > 0 ||
      request.cloze > 0 || (request.blocks && !request.blocks->empty())) {
    throw UsageError(with_hint(fmt::format("{} is an image classifier ({}): --corpus, --windows, --seq-len, --stride, "
                                           "--cloze and --blocks are for language models",
                                           request.checkpoint, config.model.family),
                               "`tfw eval CHECKPOINT` evaluates it on its run's whole validation split"));
  }
  const ModelFamily& family = registry.family(config.model.family);
  std::shared_ptr<Model> model = family.build(*config.model.spec, config.train.seed);
  model->to(device_resolve(config.train.device.text()));
  checkpoint_load(request.checkpoint, *model, nullptr);
  model->eval();
  const std::int64_t B = forward_batch(config, meta.micro_batch);  // "auto": the micro-batch it trained with
  std::unique_ptr<TaskData> data = task_data_open(config, request.home, B, 0, config.train.seed, on_message);
  const ImageDataConfig& image = config.data.image;
  const ImageSplits splits = image_splits_load(image);  // for the split's size and name
  const std::int64_t batches = (splits.validation.count + B - 1) / B;
  const std::vector<Metric> metrics = data->validate(*model, batches, config.train.precision, nullptr);
  EvalReport report = report_of(request, config, meta);
  report.task = task_name(config.data.task);
  report.seq_len = data->tokens_per_example();
  EvalResult result;
  result.corpus = image.dataset == "fashion-mnist" ? "fashion-mnist" : fs::path(image.dataset).filename().string();
  result.shard_dir = splits.dir;
  result.mode = image.validation;  // "test" or "tuning"
  result.windows = splits.validation.count;
  result.tokens = splits.validation.count * report.seq_len;
  result.loss = metrics[0].value;
  result.accuracy = metrics[1].value;
  const double nan = std::nan("");
  result.perplexity = result.bits_per_token = result.bits_per_byte = nan;
  report.results.push_back(result);
  return report;
}

}  // namespace

namespace {

// The run config a checkpoint holds, on request.device when one is asked for (checkpoints are
// device-free: a GPU run's config names "cuda", and the CPU evaluates it with --device cpu).
RunConfig checkpoint_config(const Registry& registry, const EvalRequest& request, const CheckpointMeta& meta) {
  try {
    return checkpoint_run_config(registry, meta, request.checkpoint, request.device);
  } catch (const UsageError& e) {
    const std::string message = first_line(e.what());
    const bool device = message.find("train.device") != std::string::npos;
    throw UsageError(with_hint(fmt::format("cannot rebuild the model of {}: {}", request.checkpoint, message),
                               device ? "evaluate it on another device with --device cpu (checkpoints are device-free)"
                                      : "the checkpoint needs the plugin of its model family: `tfw plugins` lists the "
                                        "loaded ones (TFW_PLUGIN_PATH adds folders)"));
  }
}

// The window T: --seq-len, else the run's; within the model's context, and no shorter than
// --stride.
std::int64_t window_length(const EvalRequest& request, const RunConfig& config, const ModelShape& shape) {
  const std::int64_t T = request.seq_len > 0 ? request.seq_len : train_seq_len(config);
  if (T > shape.seq_len) {
    throw UsageError(with_hint(fmt::format("--seq-len {} exceeds the model's context ({} tokens)", T, shape.seq_len),
                               fmt::format("use --seq-len {} or less", shape.seq_len)));
  }
  if (request.stride > T) {
    throw UsageError(
        with_hint(fmt::format("--stride {} exceeds the window ({} tokens): text would be skipped", request.stride, T),
                  fmt::format("use --stride {} or less", T)));
  }
  return T;
}

// The checkpoint's language model, rebuilt, on its device, with the checkpoint's weights.
std::shared_ptr<LanguageModel> load_language_model(const Registry& registry, const EvalRequest& request,
                                                   const RunConfig& config) {
  const ModelFamily& family = registry.family(config.model.family);
  std::shared_ptr<LanguageModel> model =
      as_language_model(family.build(*config.model.spec, config.train.seed), "tfw eval");
  model->to(device_resolve(config.train.device.text()));
  checkpoint_load(request.checkpoint, *model, nullptr);
  return model;
}

// Bytes each token decodes to (bits per byte): 1 for the byte tokenizer.
std::vector<double> token_byte_counts(const Tokenizer& tokenizer, const std::string& tokenizer_name) {
  std::vector<double> token_bytes(tokenizer.vocab_size(), 1.0);
  if (tokenizer_name != "byte") {
    for (std::uint32_t id = 0; id < tokenizer.vocab_size(); ++id) {
      token_bytes[id] = static_cast<double>(tokenizer.decode({id}).size());
    }
  }
  return token_bytes;
}

// What scoring a corpus's windows takes: the model and how it reads (window T, vocabulary V,
// batch B, precision), the number N of even windows, and the bytes each token decodes to.
struct WindowScorer {
  LanguageModel& model;
  std::int64_t T, V, B, N;
  Precision precision;
  const std::vector<double>& token_bytes;
};

// The sums the loss, perplexity and bits per byte are made of.
struct LossSums {
  double loss_sum = 0, bytes = 0;
  std::int64_t tokens = 0;
};

// A corpus's prepared shards: their folder and their metadata.
struct PreparedCorpus {
  std::string dir;
  ShardMeta shards;
};

// `corpus` prepared with the model's tokenizer (prepared first when missing), checked to be
// made of tokens the model reads.
PreparedCorpus prepare_corpus(const std::string& corpus, const EvalRequest& request, const RunConfig& config,
                              const Tokenizer& tokenizer, std::int64_t V) {
  if (corpus.find('/') != std::string::npos && !fs::exists(corpus)) {
    throw UsageError(with_hint(fmt::format("--corpus {}: no such file or folder", corpus),
                               "name a built-in corpus (`tfw data list`), a text file, a folder of text, or a "
                               "folder of prepared shards"));
  }
  PrepareOptions prepare;
  prepare.tokenizer = config.data.tokenizer;
  const std::string dir = data_ensure_prepared(corpus, config.data.tokenizer, home_data_dir(request.home), prepare);
  const ShardMeta shards = shard_meta_read(dir);
  if (shards.tokenizer != "unknown" && shards.tokenizer != tokenizer.name()) {
    throw UsageError(with_hint(fmt::format("--corpus {}: its shards ({}) were made with the {} tokenizer, the model "
                                           "reads {} tokens",
                                           corpus, dir, shards.tokenizer, tokenizer.name()),
                               "name the corpus's text, which is prepared with the model's tokenizer, or shards made "
                               "with it (tfw data prepare CORPUS --tokenizer " +
                                   config.data.tokenizer + ")"));
  }
  if (shards.vocab_size > static_cast<std::uint32_t>(V)) {
    throw UsageError(
        fmt::format("--corpus {}: its vocabulary ({}) exceeds the model's ({})", corpus, shards.vocab_size, V));
  }
  return {dir, shards};
}

// Even windows, batched as the trainer batches its validation windows: on the run's own
// corpus the batch means, and so the loss, are the trainer's.
LossSums score_even_windows(const WindowScorer& scorer, const TokenShard& val, std::uint64_t span, EvalResult& result) {
  const std::int64_t T = scorer.T, B = scorer.B, N = scorer.N;
  LossSums sums;
  result.mode = "even";
  result.windows = N;
  for (std::int64_t first = 0; first < N; first += B) {
    std::vector<std::uint64_t> starts;
    for (std::int64_t w = first; w < std::min(N, first + B); ++w) {
      starts.push_back(N > 1 ? span * static_cast<std::uint64_t>(w) / static_cast<std::uint64_t>(N - 1) : 0);
    }
    const torch::Tensor batch = windows_batch(val, starts, T);
    const double mean = token_losses(scorer.model, batch, T, scorer.V, scorer.precision).mean().item<double>();
    const std::int64_t n = static_cast<std::int64_t>(starts.size()) * T;
    sums.loss_sum += mean * static_cast<double>(n);
    sums.tokens += n;
    auto rows = batch.accessor<std::int64_t, 2>();
    for (std::int64_t b = 0; b < batch.size(0); ++b) {
      for (std::int64_t t = 1; t <= T; ++t) sums.bytes += scorer.token_bytes[static_cast<std::size_t>(rows[b][t])];
    }
  }
  return sums;
}

// Strided windows over the whole text: each target scored once.
LossSums score_strided_windows(const WindowScorer& scorer, const TokenShard& val, std::uint64_t span, std::int64_t S,
                               EvalResult& result) {
  const std::int64_t T = scorer.T, B = scorer.B;
  LossSums sums;
  result.mode = fmt::format("stride:{}", S);
  std::vector<std::pair<std::uint64_t, std::int64_t>> windows;  // start, targets scored (the last ones)
  std::uint64_t scored_to = 0;                                  // targets (positions) scored so far: 1..scored_to
  for (std::uint64_t start = 0; start <= span; start += static_cast<std::uint64_t>(S)) {
    const std::uint64_t end = start + static_cast<std::uint64_t>(T);  // last target position
    windows.emplace_back(start, static_cast<std::int64_t>(end - scored_to));
    scored_to = end;
  }
  if (scored_to < span + static_cast<std::uint64_t>(T)) {
    windows.emplace_back(span, static_cast<std::int64_t>(span + static_cast<std::uint64_t>(T) - scored_to));
  }
  result.windows = static_cast<std::int64_t>(windows.size());
  for (std::size_t first = 0; first < windows.size(); first += static_cast<std::size_t>(B)) {
    std::vector<std::uint64_t> starts;
    const std::size_t last = std::min(windows.size(), first + static_cast<std::size_t>(B));
    for (std::size_t w = first; w < last; ++w) starts.push_back(windows[w].first);
    const torch::Tensor batch = windows_batch(val, starts, T);
    const torch::Tensor losses = token_losses(scorer.model, batch, T, scorer.V, scorer.precision).to(torch::kFloat64);
    auto rows = batch.accessor<std::int64_t, 2>();
    for (std::size_t w = first; w < last; ++w) {
      const std::int64_t b = static_cast<std::int64_t>(w - first), count = windows[w].second;
      sums.loss_sum += losses[b].narrow(0, T - count, count).sum().item<double>();
      sums.tokens += count;
      for (std::int64_t t = T - count + 1; t <= T; ++t) {
        sums.bytes += scorer.token_bytes[static_cast<std::size_t>(rows[b][t])];
      }
    }
  }
  return sums;
}

// --cloze-list: the passages as TSV (index, byte offset, target word, context).
void write_cloze_list(const EvalRequest& request, const RunConfig& config, const std::string& corpus, std::int64_t T,
                      const Tokenizer& tokenizer, const std::vector<ClozePassage>& passages) {
  std::ofstream list(request.cloze_list);
  list << "# cloze passages of " << corpus << " (" << config.data.tokenizer << " tokens, window " << T
       << "): index, byte offset, target word, context\n";
  for (std::size_t i = 0; i < passages.size(); ++i) {
    std::string context = tokenizer.decode(passages[i].context);
    for (char& c : context) c = c == '\t' || c == '\n' || c == '\r' ? ' ' : c;
    list << i << '\t' << passages[i].offset << '\t' << passages[i].word << '\t' << context << '\n';
  }
  if (!list) throw Error(fmt::format("cannot write the cloze passages to '{}'", request.cloze_list));
}

// One passage, one forward pass: its target's log-likelihood added to `logprob`, token by
// token; whether greedy decoding completes it exactly.
bool score_cloze_passage(const WindowScorer& scorer, const ClozePassage& p, double& logprob) {
  std::vector<std::int64_t> input(p.context.begin(), p.context.end());
  input.insert(input.end(), p.target.begin(), p.target.end() - 1);
  const torch::Tensor tokens_in = torch::tensor(input, torch::kInt64).unsqueeze(0).to(module_device(scorer.model));
  torch::Tensor logits;
  {
    const AutocastGuard autocast(scorer.precision, module_device(scorer.model));
    logits = scorer.model.forward(tokens_in);
  }
  const torch::Tensor log_probs = torch::log_softmax(at_least_float32(logits)[0].to(torch::kFloat64), -1);
  bool exact = true;
  for (std::size_t j = 0; j < p.target.size(); ++j) {
    const std::int64_t at = static_cast<std::int64_t>(p.context.size() + j) - 1;
    logprob += log_probs[at][static_cast<std::int64_t>(p.target[j])].item<double>();
    exact = exact && log_probs[at].argmax().item<std::int64_t>() == static_cast<std::int64_t>(p.target[j]);
  }
  return exact;
}

// The validation text, decoded, and its passages; one forward pass a passage.
void score_cloze(const WindowScorer& scorer, const TokenShard& val, const Tokenizer& tokenizer,
                 const EvalRequest& request, const RunConfig& config, const std::string& corpus, EvalResult& result) {
  std::vector<std::uint32_t> ids;
  val.read(0, val.size(), ids);
  const std::vector<ClozePassage> passages =
      cloze_passages(tokenizer.decode(ids), tokenizer, request.cloze, static_cast<std::size_t>(scorer.T));
  if (passages.empty()) {
    throw UsageError(with_hint(fmt::format("--corpus {}: its validation text has no cloze passage (a sentence-final "
                                           "word of 4+ letters named earlier in its context)",
                                           corpus),
                               "use a longer English text"));
  }
  if (!request.cloze_list.empty()) write_cloze_list(request, config, corpus, scorer.T, tokenizer, passages);
  double logprob = 0;
  for (const ClozePassage& p : passages) {
    result.cloze_correct += score_cloze_passage(scorer, p, logprob) ? 1 : 0;
    result.cloze_tokens += static_cast<std::int64_t>(p.target.size());
  }
  result.cloze_items = static_cast<std::int64_t>(passages.size());
  result.cloze_accuracy = static_cast<double>(result.cloze_correct) / static_cast<double>(result.cloze_items);
  result.cloze_logprob = logprob / static_cast<double>(result.cloze_items);
}

// The loss and what follows from it.
void set_loss(EvalResult& result, const LossSums& sums) {
  result.tokens = sums.tokens;
  result.loss = sums.loss_sum / static_cast<double>(sums.tokens);
  result.perplexity = std::exp(result.loss);
  result.bits_per_token = result.loss / std::log(2.0);
  result.bytes = sums.bytes;
  result.bits_per_byte = sums.bytes > 0 ? sums.loss_sum / std::log(2.0) / sums.bytes : std::nan("");
}

// One corpus's result: its validation shard scored in the request's windows (and cloze
// passages, when asked).
EvalResult evaluate_corpus(const std::string& corpus, const EvalRequest& request, const RunConfig& config,
                           const Tokenizer& tokenizer, const WindowScorer& scorer,
                           const std::function<void(const std::string&)>& on_message) {
  const std::int64_t T = scorer.T;
  const PreparedCorpus prepared = prepare_corpus(corpus, request, config, tokenizer, scorer.V);
  TokenShard val(prepared.dir + "/val.bin", prepared.shards.dtype);
  if (val.size() <= static_cast<std::uint64_t>(T) + 1) {
    throw UsageError(with_hint(fmt::format("--corpus {}: its validation text has {} tokens, shorter than one window "
                                           "of {}",
                                           corpus, val.size(), T + 1),
                               "use a longer text, or a shorter --seq-len"));
  }
  EvalResult result;
  result.corpus = fs::path(corpus).filename().string();
  result.shard_dir = prepared.dir;
  if (on_message) on_message(fmt::format("evaluating on {} ({} validation tokens)", corpus, val.size()));
  const std::uint64_t span = val.size() - static_cast<std::uint64_t>(T) - 1;
  const LossSums sums = request.stride == 0 ? score_even_windows(scorer, val, span, result)
                                            : score_strided_windows(scorer, val, span, request.stride, result);
  if (request.cloze > 0) score_cloze(scorer, val, tokenizer, request, config, corpus, result);
  set_loss(result, sums);
  return result;
}

}  // namespace

EvalReport evaluate_checkpoint(const Registry& registry, const EvalRequest& request,
                               const std::function<void(const std::string&)>& on_message) {
  if (request.windows < 0 || request.seq_len < 0 || request.stride < 0) {
    throw UsageError("--windows, --seq-len and --stride take numbers >= 1");
  }
  const CheckpointMeta meta = checkpoint_read_meta(request.checkpoint);  // verifies: a corrupt file is a UsageError
  const RunConfig config = checkpoint_config(registry, request, meta);
  // The checkpoint's [data] is the file's word, not the user's: it reads only inside the home.
  stored_config_check(config, home_resolve(request.home), "checkpoint " + request.checkpoint + "'s config",
                      !request.corpora.empty(), fs::path(request.checkpoint).parent_path().string());
  if (config.data.task == Task::image_classification)
    return evaluate_images(registry, request, config, meta, on_message);
  const ModelShape shape = config.model.spec->shape();
  const std::int64_t T = window_length(request, config, shape), V = shape.vocab;
  // The trainer's windows (N), scored a micro-batch at a time ("auto": the one the run trained with).
  const std::int64_t B = forward_batch(config, meta.micro_batch);
  const std::int64_t N = request.windows > 0 ? request.windows : config.train.batch_size * config.train.eval_batches;
  const Precision precision = config.train.precision;
  std::shared_ptr<LanguageModel> model = load_language_model(registry, request, config);
  const std::vector<std::string> blocks = request.blocks.value_or(config.train.mask.use);
  const std::string mask = mask_apply(*model, config.train.mask, blocks);
  model->eval();
  torch::NoGradGuard no_grad;

  EvalReport report = report_of(request, config, meta);
  report.tokenizer = config.data.tokenizer;
  report.blocks = mask_label(blocks);
  report.mask_description = mask;
  if (!blocks.empty()) report.mask_layers = mask_layer_use(*model);
  report.seq_len = T;
  const std::unique_ptr<Tokenizer> tokenizer = tokenizer_create(config.data.tokenizer);
  const std::vector<double> token_bytes = token_byte_counts(*tokenizer, config.data.tokenizer);
  const WindowScorer scorer{*model, T, V, B, N, precision, token_bytes};
  const std::vector<std::string> corpora =
      request.corpora.empty() ? std::vector<std::string>{config.data.corpus} : request.corpora;
  for (const std::string& corpus : corpora) {
    report.results.push_back(evaluate_corpus(corpus, request, config, *tokenizer, scorer, on_message));
  }
  return report;
}

}  // namespace tfw
