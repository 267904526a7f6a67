// See evaluate.h. Shapes: B windows per batch, T tokens per window, V vocabulary.
#include "engine/evaluate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "engine/checkpoint.h"
#include "engine/data/cloze.h"
#include "engine/data/images.h"
#include "engine/data/shards.h"
#include "engine/data/tokenizer.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/home.h"
#include "engine/registry.h"
#include "engine/mask.h"
#include "engine/run_config.h"
#include "engine/train/eval.h"
#include "engine/train/schedule.h"
#include "engine/train/task_data.h"
#include "engine/task.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The batch of windows starting at `starts` (B, T + 1).
torch::Tensor windows_batch(const TokenShard& shard, const std::vector<std::uint64_t>& starts, std::int64_t T) {
  torch::Tensor batch = torch::empty({static_cast<std::int64_t>(starts.size()), T + 1}, torch::kInt64);
  auto rows = batch.accessor<std::int64_t, 2>();
  for (std::size_t b = 0; b < starts.size(); ++b) {
    for (std::int64_t t = 0; t <= T; ++t) rows[static_cast<std::int64_t>(b)][t] = shard[starts[b] + static_cast<std::uint64_t>(t)];
  }
  return batch;
}

// Per-target losses (B, T) of a batch: the trainer's loss, unreduced.
torch::Tensor token_losses(LanguageModel& model, const torch::Tensor& batch, std::int64_t T, std::int64_t V,
                           Precision precision) {
  return loss_of(model, batch, T, V, precision, torch::kNone).reshape({-1, T});
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
  model->to(device_resolve(config.train.device));
  checkpoint_load(request.checkpoint, *model, nullptr);
  model->eval();
  const std::int64_t B = config.train.batch_size;
  std::unique_ptr<TaskData> data = task_data_open(config, request.home, B, 0, config.train.seed, on_message);
  const ImageDataConfig& image = config.data.image;
  const ImageSplits splits = image_splits_load(image);  // for the split's size and name
  const std::int64_t batches = (splits.validation.count + B - 1) / B;
  const std::vector<Metric> metrics = data->validate(*model, batches, precision_parse(config.train.precision), nullptr);
  EvalReport report;
  report.checkpoint = fs::absolute(request.checkpoint).string();
  report.family = config.model.family;
  report.model = config.model.spec->summary();
  report.task = config.data.task;
  report.step = meta.step;
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
    toml::table table = toml::parse(std::string_view(meta.config_toml), request.checkpoint);
    if (!request.device.empty()) {
      toml::table* train = table["train"].as_table();
      if (train == nullptr) train = table.insert_or_assign("train", toml::table{}).first->second.as_table();
      train->insert_or_assign("device", request.device);
      if (request.device == "cpu") train->erase("tf32");  // a CUDA setting
    }
    return run_config_parse(registry, table, request.checkpoint);
  } catch (const UsageError& e) {
    const std::string message = first_line(e.what());
    const bool device = message.find("train.device") != std::string::npos;
    throw UsageError(with_hint(fmt::format("cannot rebuild the model of {}: {}", request.checkpoint, message),
                               device ? "evaluate it on another device with --device cpu (checkpoints are device-free)"
                                      : "the checkpoint needs the plugin of its model family: `tfw plugins` lists the "
                                        "loaded ones (TFW_PLUGIN_PATH adds folders)"));
  }
}

}  // namespace

EvalReport evaluate_checkpoint(const Registry& registry, const EvalRequest& request,
                               const std::function<void(const std::string&)>& on_message) {
  if (request.windows < 0 || request.seq_len < 0 || request.stride < 0) {
    throw UsageError("--windows, --seq-len and --stride take numbers >= 1");
  }
  const CheckpointMeta meta = checkpoint_read_meta(request.checkpoint);  // verifies: a corrupt file is a UsageError
  const RunConfig config = checkpoint_config(registry, request, meta);
  if (config.data.task == kImageClassificationTask) return evaluate_images(registry, request, config, meta, on_message);
  const ModelShape shape = config.model.spec->shape();
  const std::int64_t T = request.seq_len > 0 ? request.seq_len : train_seq_len(config), V = shape.vocab;
  if (T > shape.seq_len) {
    throw UsageError(with_hint(fmt::format("--seq-len {} exceeds the model's context ({} tokens)", T, shape.seq_len),
                               fmt::format("use --seq-len {} or less", shape.seq_len)));
  }
  if (request.stride > T) {
    throw UsageError(with_hint(fmt::format("--stride {} exceeds the window ({} tokens): text would be skipped",
                                           request.stride, T),
                               fmt::format("use --stride {} or less", T)));
  }
  const std::int64_t B = config.train.batch_size;
  const std::int64_t N = request.windows > 0 ? request.windows : B * config.train.eval_batches;
  const Precision precision = precision_parse(config.train.precision);
  const ModelFamily& family = registry.family(config.model.family);
  std::shared_ptr<LanguageModel> model = as_language_model(family.build(*config.model.spec, config.train.seed), "tfw eval");
  model->to(device_resolve(config.train.device));
  checkpoint_load(request.checkpoint, *model, nullptr);
  const std::vector<std::string> blocks = request.blocks.value_or(config.train.mask.use);
  const std::string mask = mask_apply(*model, config.train.mask, blocks);
  model->eval();
  torch::NoGradGuard no_grad;

  EvalReport report;
  report.checkpoint = fs::absolute(request.checkpoint).string();
  report.family = config.model.family;
  report.model = config.model.spec->summary();
  report.tokenizer = config.data.tokenizer;
  report.blocks = mask_label(blocks);
  report.mask_description = mask;
  report.step = meta.step;
  report.seq_len = T;
  const std::unique_ptr<Tokenizer> tokenizer = tokenizer_create(config.data.tokenizer);
  // Bytes each token decodes to (bits per byte): 1 for the byte tokenizer.
  std::vector<double> token_bytes(tokenizer->vocab_size(), 1.0);
  if (config.data.tokenizer != "byte") {
    for (std::uint32_t id = 0; id < tokenizer->vocab_size(); ++id) {
      token_bytes[id] = static_cast<double>(tokenizer->decode({id}).size());
    }
  }
  const std::vector<std::string> corpora = request.corpora.empty() ? std::vector<std::string>{config.data.corpus}
                                                                   : request.corpora;
  for (const std::string& corpus : corpora) {
    if (corpus.find('/') != std::string::npos && !fs::exists(corpus)) {
      throw UsageError(with_hint(fmt::format("--corpus {}: no such file or folder", corpus),
                                 "name a built-in corpus (`tfw data list`), a text file, a folder of text, or a "
                                 "folder of prepared shards"));
    }
    PrepareOptions prepare;
    prepare.tokenizer = config.data.tokenizer;
    const std::string dir = data_ensure_prepared(corpus, config.data.tokenizer, home_data_dir(request.home), prepare);
    const ShardMeta shards = shard_meta_read(dir);
    if (shards.tokenizer != "unknown" && shards.tokenizer != tokenizer->name()) {
      throw UsageError(with_hint(fmt::format("--corpus {}: its shards ({}) were made with the {} tokenizer, the model "
                                             "reads {} tokens",
                                             corpus, dir, shards.tokenizer, tokenizer->name()),
                                 "name the corpus's text, which is prepared with the model's tokenizer, or shards made "
                                 "with it (tfw data prepare CORPUS --tokenizer " + config.data.tokenizer + ")"));
    }
    if (shards.vocab_size > static_cast<std::uint32_t>(V)) {
      throw UsageError(fmt::format("--corpus {}: its vocabulary ({}) exceeds the model's ({})", corpus,
                                   shards.vocab_size, V));
    }
    TokenShard val(dir + "/val.bin", shards.dtype);
    if (val.size() <= static_cast<std::uint64_t>(T) + 1) {
      throw UsageError(with_hint(fmt::format("--corpus {}: its validation text has {} tokens, shorter than one window "
                                             "of {}",
                                             corpus, val.size(), T + 1),
                                 "use a longer text, or a shorter --seq-len"));
    }
    EvalResult result;
    result.corpus = fs::path(corpus).filename().string();
    result.shard_dir = dir;
    if (on_message) on_message(fmt::format("evaluating on {} ({} validation tokens)", corpus, val.size()));
    double loss_sum = 0, bytes = 0;
    std::int64_t tokens = 0;
    const std::uint64_t span = val.size() - static_cast<std::uint64_t>(T) - 1;
    if (request.stride == 0) {
      // Even windows, batched as the trainer batches its validation windows: on the run's own
      // corpus the batch means, and so the loss, are the trainer's.
      result.mode = "even";
      result.windows = N;
      for (std::int64_t first = 0; first < N; first += B) {
        std::vector<std::uint64_t> starts;
        for (std::int64_t w = first; w < std::min(N, first + B); ++w) {
          starts.push_back(N > 1 ? span * static_cast<std::uint64_t>(w) / static_cast<std::uint64_t>(N - 1) : 0);
        }
        const torch::Tensor batch = windows_batch(val, starts, T);
        const double mean = token_losses(*model, batch, T, V, precision).mean().item<double>();
        const std::int64_t n = static_cast<std::int64_t>(starts.size()) * T;
        loss_sum += mean * static_cast<double>(n);
        tokens += n;
        auto rows = batch.accessor<std::int64_t, 2>();
        for (std::int64_t b = 0; b < batch.size(0); ++b) {
          for (std::int64_t t = 1; t <= T; ++t) bytes += token_bytes[static_cast<std::size_t>(rows[b][t])];
        }
      }
    } else {
      // Strided windows over the whole text: each target scored once.
      const std::int64_t S = request.stride;
      result.mode = fmt::format("stride:{}", S);
      std::vector<std::pair<std::uint64_t, std::int64_t>> windows;  // start, targets scored (the last ones)
      std::uint64_t scored_to = 0;  // targets (positions) scored so far: 1..scored_to
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
        const torch::Tensor losses = token_losses(*model, batch, T, V, precision).to(torch::kFloat64);
        auto rows = batch.accessor<std::int64_t, 2>();
        for (std::size_t w = first; w < last; ++w) {
          const std::int64_t b = static_cast<std::int64_t>(w - first), count = windows[w].second;
          loss_sum += losses[b].narrow(0, T - count, count).sum().item<double>();
          tokens += count;
          for (std::int64_t t = T - count + 1; t <= T; ++t) bytes += token_bytes[static_cast<std::size_t>(rows[b][t])];
        }
      }
    }
    if (request.cloze > 0) {
      // The validation text, decoded, and its passages; one forward pass a passage.
      std::vector<std::uint32_t> ids;
      val.read(0, val.size(), ids);
      const std::vector<ClozePassage> passages =
          cloze_passages(tokenizer->decode(ids), *tokenizer, request.cloze, static_cast<std::size_t>(T));
      if (passages.empty()) {
        throw UsageError(with_hint(fmt::format("--corpus {}: its validation text has no cloze passage (a sentence-final "
                                               "word of 4+ letters named earlier in its context)",
                                               corpus),
                                   "use a longer English text"));
      }
      if (!request.cloze_list.empty()) {
        std::ofstream list(request.cloze_list);
        list << "# cloze passages of " << corpus << " (" << config.data.tokenizer << " tokens, window " << T
             << "): index, byte offset, target word, context\n";
        for (std::size_t i = 0; i < passages.size(); ++i) {
          std::string context = tokenizer->decode(passages[i].context);
          for (char& c : context) c = c == '\t' || c == '\n' || c == '\r' ? ' ' : c;
          list << i << '\t' << passages[i].offset << '\t' << passages[i].word << '\t' << context << '\n';
        }
        if (!list) throw Error(fmt::format("cannot write the cloze passages to '{}'", request.cloze_list));
      }
      double logprob = 0;
      for (const ClozePassage& p : passages) {
        std::vector<std::int64_t> input(p.context.begin(), p.context.end());
        input.insert(input.end(), p.target.begin(), p.target.end() - 1);
        const torch::Tensor tokens_in = torch::tensor(input, torch::kInt64).unsqueeze(0).to(module_device(*model));
        torch::Tensor logits;
        {
          const AutocastGuard autocast(precision, module_device(*model));
          logits = model->forward(tokens_in);
        }
        const torch::Tensor log_probs = torch::log_softmax(at_least_float32(logits)[0].to(torch::kFloat64), -1);
        bool exact = true;
        for (std::size_t j = 0; j < p.target.size(); ++j) {
          const std::int64_t at = static_cast<std::int64_t>(p.context.size() + j) - 1;
          logprob += log_probs[at][static_cast<std::int64_t>(p.target[j])].item<double>();
          exact = exact && log_probs[at].argmax().item<std::int64_t>() == static_cast<std::int64_t>(p.target[j]);
        }
        result.cloze_correct += exact ? 1 : 0;
        result.cloze_tokens += static_cast<std::int64_t>(p.target.size());
      }
      result.cloze_items = static_cast<std::int64_t>(passages.size());
      result.cloze_accuracy = static_cast<double>(result.cloze_correct) / static_cast<double>(result.cloze_items);
      result.cloze_logprob = logprob / static_cast<double>(result.cloze_items);
    }
    result.tokens = tokens;
    result.loss = loss_sum / static_cast<double>(tokens);
    result.perplexity = std::exp(result.loss);
    result.bits_per_token = result.loss / std::log(2.0);
    result.bytes = bytes;
    result.bits_per_byte = bytes > 0 ? loss_sum / std::log(2.0) / bytes : std::nan("");
    report.results.push_back(result);
  }
  return report;
}

}  // namespace tfw
