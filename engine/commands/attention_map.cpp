// See attention_map.h.
#include "engine/commands/attention_map.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/data/images.h"
#include "engine/data/shards.h"
#include "engine/data/tokenizer.h"
#include "engine/machine/device.h"
#include "engine/core/error.h"
#include "engine/data/stored_paths.h"
#include "engine/core/home.h"
#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/plugin/task.h"
#include "engine/train/window_loss.h"

namespace tfw {

namespace {

const std::vector<std::string> kProjections = {"q", "k", "v", "o", "ffn"};

std::string layer_label(std::int64_t layer, const std::string& projection) {
  return fmt::format("layers.{}.{}", layer, projection);
}

// A map of one layer before its input: its label, parameter tokens and count at creation.
AttentionMap layer_map(std::int64_t layer, const std::string& projection, std::int64_t parameter_tokens,
                       const std::map<std::string, std::int64_t>& created_with) {
  AttentionMap result;
  result.parameter_tokens = parameter_tokens;
  result.label = layer_label(layer, projection);
  if (auto created = created_with.find(result.label); created != created_with.end())
    result.tokens_at_creation = created->second;
  return result;
}

// The scores the capture holds for the map's layer, (T, n) row-major, into the map.
void take_scores(const ScoreCapture& capture, AttentionMap& result) {
  const torch::Tensor scores = capture.scores()
                                   .at(result.label)
                                   .reshape({-1, result.parameter_tokens})
                                   .to(torch::kFloat32)
                                   .cpu()
                                   .contiguous();  // (T, n)
  result.scores.assign(scores.data_ptr<float>(), scores.data_ptr<float>() + scores.numel());
}

}  // namespace

struct AttentionProbe::State {
  std::string checkpoint, home;
  RunConfig config;
  std::shared_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;  // language models
  std::unique_ptr<ImageSplits> images;   // image classifiers: read on first use
  std::int64_t layers = 0;
  std::map<std::string, std::int64_t> tokens_of;     // label -> parameter tokens
  std::map<std::string, std::int64_t> created_with;  // label -> tokens at creation (the n0 buffer)
};

std::string token_label(const std::string& piece) {
  std::string out;
  for (unsigned char c : piece) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

std::string token_row_label(const std::string& piece) {
  std::string out;
  for (char c : token_label(piece)) out += c == ' ' ? std::string("\u2423") : std::string(1, c);
  return out.empty() ? "(empty)" : out;
}

AttentionProbe::AttentionProbe(const Registry& registry, const std::string& checkpoint, const std::string& home)
    : state_(std::make_unique<State>()) {
  if (!std::filesystem::exists(checkpoint)) {
    throw UsageError(with_hint(fmt::format("checkpoint {} does not exist", checkpoint),
                               "`tfw runs show RUN` lists a run's checkpoints; pruned ones are gone"));
  }
  state_->checkpoint = checkpoint;
  state_->home = home;
  CheckpointMeta meta = checkpoint_read_meta(checkpoint);  // verifies size and CRC first
  state_->config = checkpoint_run_config(registry, meta, checkpoint);
  stored_config_check(state_->config, home_resolve(home), "checkpoint " + checkpoint + "'s config", true,
                      std::filesystem::path(checkpoint).parent_path().string());
  const ModelFamily& family = registry.family(state_->config.model.family);
  state_->model = family.build(*state_->config.model.spec, 0);
  checkpoint_load(checkpoint, *state_->model, nullptr);
  state_->model->eval();
  if (!image_model()) state_->tokenizer = tokenizer_create(state_->config.data.tokenizer);
  for (const auto& item : state_->model->named_parameters()) {
    const std::string& name = item.key();
    const std::string suffix = ".keys";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      state_->tokens_of[name.substr(0, name.size() - suffix.size())] = item.value().size(0);
    }
  }
  for (const auto& item : state_->model->named_buffers()) {
    const std::string& name = item.key();
    const std::string suffix = ".n0";
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      state_->created_with[name.substr(0, name.size() - suffix.size())] = item.value().item<std::int64_t>();
    }
  }
  if (state_->tokens_of.empty()) {
    throw UsageError(with_hint(fmt::format("checkpoint {} holds a {} model, which has no Pattention layers "
                                           "(no parameter tokens to attend to)",
                                           checkpoint, state_->config.model.family),
                               "pick a checkpoint of a tokenformer or vision_tokenformer run"));
  }
  state_->layers = state_->config.model.spec->shape().layers;
}

AttentionProbe::~AttentionProbe() = default;

const std::string& AttentionProbe::family() const { return state_->config.model.family; }
std::int64_t AttentionProbe::layers() const { return state_->layers; }
std::int64_t AttentionProbe::context() const { return state_->config.model.spec->shape().seq_len; }
std::vector<std::string> AttentionProbe::projections() const { return kProjections; }

std::int64_t AttentionProbe::parameter_tokens(std::int64_t layer, const std::string& projection) const {
  if (layer < 0 || layer >= state_->layers) {
    throw UsageError(with_hint(fmt::format("layer {} does not exist: the model has {} layers", layer, state_->layers),
                               fmt::format("use --layer 0..{}", state_->layers - 1)));
  }
  auto found = state_->tokens_of.find(layer_label(layer, projection));
  if (found == state_->tokens_of.end()) {
    throw UsageError(with_hint(fmt::format("unknown projection '{}'", projection), "use one of q, k, v, o, ffn"));
  }
  return found->second;
}

bool AttentionProbe::image_model() const { return state_->config.data.task == Task::image_classification; }

std::int64_t AttentionProbe::images() {
  if (!image_model()) return 0;
  if (state_->images == nullptr)
    state_->images = std::make_unique<ImageSplits>(image_splits_load(state_->config.data.image));
  return state_->images->validation.count;
}

AttentionMap AttentionProbe::image_map(std::int64_t index, std::int64_t layer, const std::string& projection) {
  if (!image_model()) {
    throw UsageError(with_hint(fmt::format("{} is a language model: it reads text, not images", state_->checkpoint),
                               "give --text instead of --image"));
  }
  const std::int64_t count = images();
  if (index < 0 || index >= count) {
    throw UsageError(with_hint(fmt::format("image {} does not exist: the validation split has {} images", index, count),
                               fmt::format("pick 0..{}", count - 1)));
  }
  AttentionMap result = layer_map(layer, projection, parameter_tokens(layer, projection), state_->created_with);
  const ImageSplits& splits = *state_->images;
  const ImageSet& set = splits.validation;
  const std::int64_t C = set.channels, H = set.height, W = set.width;
  AttentionImage image;
  image.index = index;
  image.height = H;
  image.width = W;
  image.channels = C;
  image.label = set.labels[static_cast<std::size_t>(index)];
  const std::uint8_t* raw = set.pixels.data() + index * C * H * W;  // (C, H, W)
  torch::Tensor input = torch::empty({1, C, H, W}, torch::kFloat32);
  float* in = input.data_ptr<float>();
  image.pixels.resize(static_cast<std::size_t>(H * W * C));
  for (std::int64_t c = 0; c < C; ++c) {
    for (std::int64_t y = 0; y < H; ++y) {
      for (std::int64_t x = 0; x < W; ++x) {
        const double pixel = raw[(c * H + y) * W + x] / 255.0;
        in[(c * H + y) * W + x] = static_cast<float>((pixel - splits.mean) / splits.std);
        image.pixels[static_cast<std::size_t>((y * W + x) * C + c)] = static_cast<float>(pixel);
      }
    }
  }
  const PatchGrid grid = as_image_classifier(state_->model, "tfw attention --image")->patch_grid();
  image.rows = grid.rows;
  image.cols = grid.cols;
  image.patch = grid.patch;
  image.leading = grid.leading;
  torch::NoGradGuard no_grad;
  ScoreCapture capture({result.label});
  const torch::Tensor parameter = state_->model->parameters().front();
  const torch::Tensor logits = state_->model->forward(input.to(parameter.device(), parameter.scalar_type()));
  image.predicted = logits.argmax(1).item<std::int64_t>();
  take_scores(capture, result);
  if (grid.leading > 0) result.tokens.push_back("cls");
  for (std::int64_t r = 0; r < grid.rows; ++r) {
    for (std::int64_t c = 0; c < grid.cols; ++c) result.tokens.push_back(fmt::format("r{}c{}", r, c));
  }
  result.image = std::move(image);
  return result;
}

AttentionMap AttentionProbe::map(const std::string& text, std::int64_t layer, const std::string& projection) {
  if (image_model()) {
    throw UsageError(
        with_hint(fmt::format("{} is an image classifier: its input tokens are an image's patches", state_->checkpoint),
                  "give --image N (an image of the validation split) instead of --text"));
  }
  AttentionMap result = layer_map(layer, projection, parameter_tokens(layer, projection), state_->created_with);
  std::vector<std::uint32_t> ids;
  state_->tokenizer->encode(text, ids);
  if (ids.empty()) throw UsageError(with_hint("the text is empty", "give some text to encode, e.g. --text 'the cat'"));
  if (static_cast<std::int64_t>(ids.size()) > context()) {
    ids.resize(static_cast<std::size_t>(context()));
    result.truncated = true;
  }
  torch::Tensor input = torch::empty({1, static_cast<std::int64_t>(ids.size())}, torch::kInt64);
  for (std::size_t i = 0; i < ids.size(); ++i)
    input[0][static_cast<std::int64_t>(i)] = static_cast<std::int64_t>(ids[i]);
  torch::NoGradGuard no_grad;
  ScoreCapture capture({result.label});
  state_->model->forward(input.to(module_device(*state_->model)));
  take_scores(capture, result);
  for (std::uint32_t id : ids) result.tokens.push_back(state_->tokenizer->decode({id}));
  return result;
}

std::vector<ActivatingContext> AttentionProbe::top_contexts(std::int64_t layer, const std::string& projection,
                                                            std::int64_t parameter_token, int k, std::int64_t windows) {
  if (image_model()) {
    throw UsageError(with_hint("the top contexts are text: this is an image classifier",
                               "with --image N, --token K maps parameter token K over the image's patches"));
  }
  const std::int64_t n = parameter_tokens(layer, projection);
  if (parameter_token < 0 || parameter_token >= n) {
    throw UsageError(with_hint(fmt::format("parameter token {} does not exist: {} has {} tokens", parameter_token,
                                           layer_label(layer, projection), n),
                               fmt::format("pick 0..{}", n - 1)));
  }
  const RunConfig& config = state_->config;
  stored_paths_check({{config.data.corpus},
                      config.data.tokenizer,
                      "",
                      std::filesystem::path(state_->checkpoint).parent_path().string()},
                     home_resolve(state_->home), "checkpoint " + state_->checkpoint + "'s config");
  const std::string shard_dir = data_ensure_prepared(config.data.corpus, config.data.tokenizer,
                                                     home_data_dir(home_resolve(state_->home)), PrepareOptions());
  ShardMeta shards = shard_meta_read(shard_dir);
  TokenShard val(shard_dir + "/val.bin", shards.dtype);
  const std::int64_t T = std::min<std::int64_t>(context(), static_cast<std::int64_t>(val.size()) - 2);
  const std::string label = layer_label(layer, projection);
  torch::Tensor batch = validation_batch(val, windows, T, 1, 0);  // (windows, T + 1)
  torch::NoGradGuard no_grad;
  ScoreCapture capture({label});
  as_language_model(state_->model, "tfw attention --token")
      ->forward(batch.narrow(1, 0, T).to(module_device(*state_->model)));
  torch::Tensor column = capture.scores().at(label).select(-1, parameter_token).reshape({-1}).to(torch::kFloat32).cpu();
  const std::int64_t count = std::min<std::int64_t>(k, column.numel());
  auto top = column.topk(count);
  auto values = std::get<0>(top), where = std::get<1>(top);
  auto rows = batch.accessor<std::int64_t, 2>();
  auto decode = [&](std::int64_t row, std::int64_t from, std::int64_t to) {
    std::vector<std::uint32_t> ids;
    for (std::int64_t t = std::max<std::int64_t>(from, 0); t < std::min(to, T); ++t)
      ids.push_back(static_cast<std::uint32_t>(rows[row][t]));
    return state_->tokenizer->decode(ids);
  };
  const std::int64_t span = static_cast<std::int64_t>(val.size()) - T - 1;
  std::vector<ActivatingContext> contexts;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t flat = where[i].item<std::int64_t>();
    const std::int64_t row = flat / T, t = flat % T;
    ActivatingContext context;
    context.score = values[i].item<float>();
    context.before = decode(row, t - 24, t);
    context.token = decode(row, t, t + 1);
    context.after = decode(row, t + 1, t + 9);
    context.position = (windows > 1 ? span * row / (windows - 1) : 0) + t;
    contexts.push_back(std::move(context));
  }
  return contexts;
}

}  // namespace tfw
