// The language-model and image-classification tasks' data, loss and metrics. See task.h.
#include "engine/train/task_data.h"

#include "engine/train/lm_loss.h"

#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include <ATen/record_function.h>
#include <fmt/format.h>

#include "engine/data/images.h"
#include "engine/data/shards.h"
#include "engine/machine/device.h"
#include "engine/dist/dist_group.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/task.h"
#include "engine/train/window_loss.h"
#include "engine/train/sampler.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

void rng_restore(std::mt19937_64& rng, const std::string& state) {
  std::istringstream in(state);
  in >> rng;
  if (!in) throw UsageError("checkpoint has a corrupt data cursor (sampler state)");
}

// Sums `values` over the ranks (every rank gets the sums).
void sum_over_ranks(std::vector<double>& values, DistGroup* dist) {
  if (dist == nullptr) return;
  std::vector<torch::Tensor> sum{torch::tensor(values, torch::kFloat64)};
  dist->allreduce_sum(sum, "the evaluation's all-reduce");
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = sum[0][static_cast<std::int64_t>(i)].item<double>();
}

// Next-token prediction on windows of token shards (docs/design/TOKENFORMER.md §5).
class LanguageModelData : public TaskData {
 public:
  LanguageModelData(const RunConfig& config, const std::string& home, std::int64_t B, std::int64_t T,
                    std::uint64_t seed)
      : B_(B), T_(T), V_(config.model.spec->shape().vocab) {
    PrepareOptions prepare;
    const std::string shard_dir =
        data_ensure_prepared(config.data.corpus, config.data.tokenizer, home_data_dir(home), prepare);
    const ShardMeta shards = shard_meta_read(shard_dir);
    if (shards.vocab_size > static_cast<std::uint32_t>(V_)) {
      throw UsageError(with_hint(
          fmt::format("the data's vocabulary ({} from {}) exceeds model.vocab = {}", shards.vocab_size, shard_dir, V_),
          fmt::format("set model.vocab to at least {}", shards.vocab_size)));
    }
    byte_tokens_ = shards.tokenizer == "byte";
    valid_ = shards.vocab_size;
    train_ = std::make_unique<TokenShard>(shard_dir + "/train.bin", shards.dtype);
    val_ = std::make_unique<TokenShard>(shard_dir + "/val.bin", shards.dtype);
    if (train_->size() <= static_cast<std::uint64_t>(T) + 1 || val_->size() <= static_cast<std::uint64_t>(T) + 1) {
      throw UsageError(fmt::format("the shards in {} are shorter than one window of {} tokens", shard_dir, T + 1));
    }
    // data.eval_corpora: their validation shards, read with the same windows as the run's own.
    for (const std::string& corpus : config.data.eval_corpora) {
      const std::string dir = data_ensure_prepared(corpus, config.data.tokenizer, home_data_dir(home), prepare);
      const ShardMeta meta = shard_meta_read(dir);
      if (meta.vocab_size > static_cast<std::uint32_t>(V_)) {
        throw UsageError(fmt::format("data.eval_corpora: the vocabulary of {} ({}) exceeds model.vocab = {}", corpus,
                                     meta.vocab_size, V_));
      }
      valid_ = std::max<std::int64_t>(valid_, meta.vocab_size);
      auto val = std::make_unique<TokenShard>(dir + "/val.bin", meta.dtype);
      if (val->size() <= static_cast<std::uint64_t>(T) + 1) {
        throw UsageError(
            fmt::format("data.eval_corpora: the validation shard of {} ({}) is shorter than one window of "
                        "{} tokens",
                        corpus, dir, T + 1));
      }
      extra_val_.emplace_back(fs::path(corpus).filename().string(), std::move(val));
    }
    sampler_ = std::make_unique<BatchSampler>(*train_, seed);
  }

  std::int64_t tokens_per_example() const override { return T_; }

  Batch next(std::int64_t B, std::int64_t first, std::int64_t count) override {
    RECORD_USER_SCOPE("tfw::data");  // a step's data, for the profiler (engine/train/profile.h)
    const torch::Tensor windows = sampler_->next(B, T_, first, count);  // (count, T + 1)
    return {windows.narrow(1, 0, T_), windows.narrow(1, 1, T_)};
  }
  std::string sampler_state() const override { return sampler_->state(); }
  void sampler_restore(const std::string& state) override { sampler_->restore(state); }

  torch::Tensor loss(Model& model, const Batch& batch, Precision precision) override {
    return batch_loss(model, batch, precision, valid_);
  }

  double validation_loss(Model& model, std::int64_t batches, Precision precision, DistGroup* dist) override {
    return evaluate(model, *val_, B_, T_, valid_, batches, precision, dist);
  }

  std::vector<Metric> validate(Model& model, std::int64_t batches, Precision precision, DistGroup* dist) override {
    const double loss = validation_loss(model, batches, precision, dist);
    std::vector<Metric> metrics{
        {"loss", loss}, {"perplexity", std::exp(loss)}, {"bits_per_token", loss / std::log(2.0)}};
    if (byte_tokens_) metrics.push_back({"bits_per_byte", loss / std::log(2.0)});
    for (const auto& [name, shard] : extra_val_) {
      metrics.push_back({"loss@" + name, evaluate(model, *shard, B_, T_, valid_, batches, precision, dist)});
    }
    return metrics;
  }

 private:
  std::int64_t B_, T_, V_;
  std::int64_t valid_ = 0;  // the ids the data holds: the shards' vocabulary (V_ past it is padding)
  bool byte_tokens_ = false;
  std::unique_ptr<TokenShard> train_, val_;
  std::vector<std::pair<std::string, std::unique_ptr<TokenShard>>> extra_val_;
  std::unique_ptr<BatchSampler> sampler_;
};

// Class labels of images (engine/data/images.h).
class ImageClassificationData : public TaskData {
 public:
  ImageClassificationData(const RunConfig& config, std::int64_t B, std::uint64_t seed,
                          const std::function<void(const std::string&)>& say)
      : B_(B), options_(config.data.image), rng_(seed) {
    splits_ = image_splits_load(options_);
    const ModelShape shape = config.model.spec->shape();
    const ImageSet& t = splits_.train;
    if (t.height != shape.image_size || t.width != shape.image_size || t.channels != shape.channels) {
      throw UsageError(with_hint(
          fmt::format("the images of {} are {}×{} with {} channel(s); the model reads {}×{} with "
                      "{}",
                      splits_.dir, t.height, t.width, t.channels, shape.image_size, shape.image_size, shape.channels),
          fmt::format("set model.image_size = {} and model.channels = {}", t.height, t.channels)));
    }
    if (t.height != t.width) {
      throw UsageError(
          fmt::format("the images of {} are {}×{}; only square images are supported", splits_.dir, t.height, t.width));
    }
    if (splits_.classes > shape.vocab) {
      throw UsageError(with_hint(fmt::format("the labels of {} go up to {}, more classes than model.classes = {}",
                                             splits_.dir, splits_.classes - 1, shape.vocab),
                                 fmt::format("set model.classes to at least {}", splits_.classes)));
    }
    tokens_ = shape.seq_len;
    if (say) {
      say(fmt::format("images: {} ({} training images, validation on {}; crop_pad {}, flip {})", splits_.dir, t.count,
                      splits_.validation_name, options_.crop_pad, options_.flip ? "on" : "off"));
    }
  }

  std::int64_t tokens_per_example() const override { return tokens_; }

  Batch next(std::int64_t B, std::int64_t first, std::int64_t count) override {
    RECORD_USER_SCOPE("tfw::data");
    const ImageSet& set = splits_.train;
    const std::int64_t C = set.channels, H = set.height, W = set.width, p = options_.crop_pad;
    torch::Tensor images = torch::empty({count, C, H, W}, torch::kFloat32);
    torch::Tensor labels = torch::empty({count}, torch::kInt64);
    float* out = images.data_ptr<float>();
    std::int64_t* label = labels.data_ptr<std::int64_t>();
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t index = static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(set.count));
      std::int64_t dy = 0, dx = 0;  // the crop's offset in the padded image, minus p
      if (p > 0) {
        dy = static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(2 * p + 1)) - p;
        dx = static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(2 * p + 1)) - p;
      }
      const bool flip = options_.flip && (rng_() & 1U) != 0;
      if (b < first || b >= first + count) continue;
      const std::int64_t row = b - first;
      label[row] = set.labels[static_cast<std::size_t>(index)];
      const std::uint8_t* source = set.pixels.data() + index * C * H * W;
      float* target = out + row * C * H * W;
      for (std::int64_t c = 0; c < C; ++c) {
        for (std::int64_t y = 0; y < H; ++y) {
          for (std::int64_t x = 0; x < W; ++x) {
            const std::int64_t sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
            const double pixel = sy >= 0 && sy < H && sx >= 0 && sx < W ? source[(c * H + sy) * W + sx] / 255.0 : 0.0;
            target[(c * H + y) * W + x] = static_cast<float>((pixel - splits_.mean) / splits_.std);
          }
        }
      }
    }
    return {images, labels};
  }
  std::string sampler_state() const override { return rng_state(rng_); }
  void sampler_restore(const std::string& state) override { rng_restore(rng_, state); }

  torch::Tensor loss(Model& model, const Batch& batch, Precision precision) override {
    return sums(model, batch, precision).first / static_cast<double>(batch.target.size(0));
  }

  double validation_loss(Model& model, std::int64_t batches, Precision precision, DistGroup* dist) override {
    return validate(model, batches, precision, dist).front().value;
  }

  // The first min(batches × B, N) validation images, in batches of B, in file order.
  std::vector<Metric> validate(Model& model, std::int64_t batches, Precision precision, DistGroup* dist) override {
    torch::NoGradGuard no_grad;
    const ImageSet& set = splits_.validation;
    const std::int64_t n = std::min(batches * B_, set.count);
    const std::int64_t count = (n + B_ - 1) / B_;
    const std::int64_t rank = dist != nullptr ? dist->rank() : 0, world = dist != nullptr ? dist->world() : 1;
    std::vector<double> totals{0, 0, 0};  // loss summed over images, correct, images
    for (std::int64_t k = rank; k < count; k += world) {
      const std::int64_t first = k * B_, size = std::min(B_, n - first);
      const auto [loss, correct] = sums(model, validation_batch(first, size), precision);
      totals[0] += loss.item<double>();
      totals[1] += static_cast<double>(correct);
      totals[2] += static_cast<double>(size);
    }
    sum_over_ranks(totals, dist);
    return {{"loss", totals[0] / totals[2]}, {"accuracy", totals[1] / totals[2], true}};
  }

 private:
  // Images [first, first + size) of the validation split, normalised, unaugmented.
  Batch validation_batch(std::int64_t first, std::int64_t size) const {
    const ImageSet& set = splits_.validation;
    const std::int64_t pixels = set.channels * set.height * set.width;
    torch::Tensor raw = torch::from_blob(const_cast<std::uint8_t*>(set.pixels.data()) + first * pixels,
                                         {size, set.channels, set.height, set.width}, torch::kUInt8);
    torch::Tensor images = ((raw.to(torch::kFloat64) / 255.0 - splits_.mean) / splits_.std).to(torch::kFloat32);
    torch::Tensor labels =
        torch::from_blob(const_cast<std::uint8_t*>(set.labels.data()) + first, {size}, torch::kUInt8).to(torch::kInt64);
    return {images, labels};
  }

  // The summed cross-entropy of a batch and its correct predictions.
  std::pair<torch::Tensor, std::int64_t> sums(Model& model, const Batch& batch, Precision precision) {
    const torch::Device device = module_device(model);
    const torch::Tensor parameter = model.parameters().front();
    const torch::Tensor images = to_device(batch.input, device).to(parameter.scalar_type());
    const torch::Tensor labels = to_device(batch.target, device);
    torch::Tensor logits;  // (B, K)
    {
      const AutocastGuard autocast(precision, device);
      logits = model.forward(images);
    }
    logits = at_least_float32(logits);
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    const std::int64_t correct = logits.argmax(1).eq(labels).sum().item<std::int64_t>();
    return {loss, correct};
  }

  std::int64_t B_;
  ImageDataConfig options_;
  ImageSplits splits_;
  std::int64_t tokens_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace

Batch random_batch(Model& model, const ModelShape& shape, std::int64_t B, std::int64_t T) {
  if (dynamic_cast<ImageClassifier*>(&model) != nullptr) {
    return {torch::randn({B, shape.channels, shape.image_size, shape.image_size}),
            torch::randint(shape.vocab, {B}, torch::kInt64)};
  }
  const torch::Tensor ids = torch::randint(shape.vocab, {B, T + 1}, torch::kInt64);  // (B, T + 1)
  return {ids.narrow(1, 0, T), ids.narrow(1, 1, T)};
}

torch::Tensor batch_loss(Model& model, const Batch& batch, Precision precision, std::int64_t valid) {
  const torch::Device device = module_device(model);
  torch::Tensor input = to_device(batch.input, device);
  if (input.is_floating_point()) input = input.to(model.parameters().front().scalar_type());
  const torch::Tensor target = to_device(batch.target, device).reshape({-1});
  auto* lm = dynamic_cast<LanguageModel*>(&model);
  if (lm != nullptr) {
    const torch::Tensor embedding = lm->token_embedding();
    const std::int64_t V = embedding.size(0), rows = target.numel();
    if (valid <= 0 || valid > V) valid = V;
    if (loss_chunked(rows, V)) {  // the full logits are never held
      torch::Tensor hidden;
      {
        const AutocastGuard autocast(precision, device);
        hidden = lm->hidden(input);
      }
      hidden = at_least_float32(hidden);
      return cross_entropy_chunked(hidden.reshape({rows, -1}), embedding, target, valid, kChunkRows, precision);
    }
  }
  torch::Tensor logits;
  {
    const AutocastGuard autocast(precision, device);
    logits = model.forward(input);
  }
  logits = at_least_float32(logits);
  if (lm != nullptr) return cross_entropy_plain(logits, target, valid);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), target);
}

std::unique_ptr<TaskData> task_data_open(const RunConfig& config, const std::string& home, std::int64_t batch_size,
                                         std::int64_t seq_len, std::uint64_t seed,
                                         const std::function<void(const std::string&)>& say) {
  if (config.data.task == Task::image_classification) {
    return std::make_unique<ImageClassificationData>(config, batch_size, seed, say);
  }
  return std::make_unique<LanguageModelData>(config, home, batch_size, seq_len, seed);
}

}  // namespace tfw
