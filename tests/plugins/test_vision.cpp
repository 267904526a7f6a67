// The image-classification task and families (docs/design/VISION.md): parameter counts and
// FLOPs against hand computation, shapes, a few steps on a fixed batch, logits and gradients
// against the independent float64 Python implementation (tests/reference/vision_reference.py),
// pattention_grow's exactness, the image data (a hand-written dataset and the real
// Fashion-MNIST package: splits, normalisation, deterministic crop and flip), and a short
// training on Fashion-MNIST reaching a test accuracy above 75%.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/data/images.h"
#include "engine/core/error.h"
#include "engine/nn/growth.h"
#include "engine/nn/model.h"
#include "engine/commands/smoke.h"
#include "engine/config/schedule.h"
#include "engine/train/task_data.h"
#include "engine/train/trainer.h"
#include "tests/support.h"

namespace tfw {
namespace test_vision {

namespace fs = std::filesystem;

RunConfig run_config_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  toml::table table = toml::parse(std::string_view(text), std::string_view("vision-test.toml"));
  config_apply_overrides(table, overrides);
  return run_config_parse(test::plugins(), table, "vision-test.toml");
}

// 28×28 images in 7×7 patches (16 patches, 17 tokens with the class token), d 16, 2 heads.
const char* kVit = R"(family = "vit"
[model]
layers = 2
d = 16
heads = 2
d_ffn = 24
)";

const char* kTokenformer = R"(family = "vision_tokenformer"
[model]
layers = 2
d = 16
heads = 2
n_attn = 12
n_ffn = 20
)";

TEST(Vision, FamiliesDeclareTheImageTask) {
  EXPECT_EQ(test::plugins().family("vit").task(), "image_classification");
  EXPECT_EQ(test::plugins().family("vision_tokenformer").task(), "image_classification");
  EXPECT_EQ(test::plugins().family("tokenformer").task(), "language_model");
  const RunConfig config = run_config_of(kVit);
  EXPECT_EQ(config.data.task, Task::image_classification);
  EXPECT_EQ(task_name(config.data.task), "image_classification");
  EXPECT_EQ(config.data.image.dataset, "fashion-mnist");
  EXPECT_EQ(config.data.image.validation, "test");
}

// Hand computation, d = 16, P = 7 (49 pixels a patch), 16 patches, T = 17, K = 10, L = 2.
TEST(Vision, VitParameterCountAndFlopsByHand) {
  const ModelSpec& spec = *run_config_of(kVit).model.spec;
  // patch embedding 49·16 + 16 = 800; class token 16; positions 17·16 = 272; head 16·10 + 10 = 170.
  EXPECT_EQ(spec.embedding_parameter_count(), 800 + 16 + 272 + 170);
  // a layer: norms 2·2·16 = 64; Q, K, V, O 4·(256 + 16) = 1088; MLP 16·24 + 24 + 24·16 + 16 = 808.
  // final norm 32.
  EXPECT_EQ(spec.parameter_count(), 1258 + 2 * (64 + 1088 + 808) + 32);
  const ModelShape shape = spec.shape();
  EXPECT_EQ(shape.seq_len, 17);
  EXPECT_EQ(shape.vocab, 10);
  EXPECT_EQ(shape.image_size, 28);
  EXPECT_EQ(shape.channels, 1);
  const FlopsPerToken f = spec.flops_per_token(17);
  EXPECT_EQ(f.token_parameter, 2 * 2 * (4 * 256 + 2 * 16 * 24));  // 2N, N = L·(4d² + 2·d·d_ffn)
  EXPECT_EQ(f.token_token, 4 * 2 * 16 * 17);
  EXPECT_EQ(f.embedding, 0);
  EXPECT_EQ(f.per_example, 2 * 49 * 16 * 16 + 2 * 16 * 10);  // 16 patches embedded, one head
  EXPECT_EQ(f.forward_per_example(), 17 * (f.token_parameter + f.token_token) + f.per_example);
}

TEST(Vision, TokenformerParameterCountAndFlopsByHand) {
  const ModelSpec& linear = *run_config_of(kTokenformer).model.spec;
  // blocks: 2·d·(4·n_attn + n_ffn) = 2·16·68 = 2176 a layer.
  EXPECT_EQ(linear.parameter_count(), 1258 + 2 * 2176 + 32);
  EXPECT_EQ(linear.flops_per_token(17).token_parameter, 2 * 2 * 2176);
  EXPECT_EQ(linear.flops_per_token(17).per_example, 2 * 49 * 16 * 16 + 2 * 16 * 10);
  const ModelSpec& pattention = *run_config_of(std::string(kTokenformer) +
                                               "patch_embed = \"pattention\"\nn_patch = 30\nhead = \"pattention\"\n"
                                               "n_head = 8\npool = \"mean\"\n")
                                     .model.spec;
  // patch embedding 30·(49 + 16) = 1950; no class token; positions 16·16 = 256; head 8·(16 + 10) = 208.
  EXPECT_EQ(pattention.embedding_parameter_count(), 1950 + 256 + 208);
  EXPECT_EQ(pattention.parameter_count(), 1950 + 256 + 208 + 2 * 2176 + 32);
  EXPECT_EQ(pattention.shape().seq_len, 16);
  EXPECT_EQ(pattention.flops_per_token(16).per_example, 2 * 30 * (49 + 16) * 16 + 2 * 8 * (16 + 10));
  // The counts agree with the built models.
  for (const ModelSpec* spec : {&linear, &pattention}) {
    auto model = test::plugins().family(spec->family()).build(*spec, 0);
    std::int64_t count = 0;
    for (const auto& p : model->parameters()) count += p.numel();
    EXPECT_EQ(count, spec->parameter_count()) << spec->summary();
  }
  auto vit = test::plugins().family("vit").build(*run_config_of(kVit).model.spec, 0);
  std::int64_t count = 0;
  for (const auto& p : vit->parameters()) count += p.numel();
  EXPECT_EQ(count, run_config_of(kVit).model.spec->parameter_count());
}

TEST(Vision, BadConfigsAreRefusedWithTheKey) {
  auto error_of = [](const std::string& text) {
    try {
      run_config_of(text);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(std::string(kVit) + "patch = 5\n").find("not divisible by patch = 5"), std::string::npos);
  EXPECT_NE(error_of(std::string(kTokenformer) + "n_patch = 5\n").find("only read with patch_embed"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kVit) + "[data]\ncorpus = \"kjv\"\n").find("corpus"), std::string::npos);
  EXPECT_NE(error_of(std::string(kVit) + "[data]\ndataset = \"/no/such/folder\"\n").find("neither a built-in"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kVit) + "[data]\nvalidation = \"train\"\n").find("validation"), std::string::npos);
  EXPECT_NE(error_of(std::string(kVit) + "[data]\ncrop_pad = -1\n").find("crop_pad"), std::string::npos);
  // A language model's [data] does not take image keys.
  EXPECT_NE(error_of(test::TinyModel{"tokenformer", 16, 2, 30, 12, 20}.toml("[data]\ndataset = \"fashion-mnist\"\n"))
                .find("dataset"),
            std::string::npos);
  // An image run has no token window to choose.
  RunConfig config = run_config_of(std::string(kVit) + "[train]\nmax_steps = 1\nseq_len = 8\n");
  EXPECT_THROW(train_plan(config), UsageError);
}

// Images of a fixed batch, normalised like the data's.
torch::Tensor fixed_images(std::int64_t B, std::uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randn({B, 1, 28, 28});
}

TEST(Vision, ShapesAndAFewStepsReduceTheLossOnAFixedBatch) {
  for (const char* text : {kVit, kTokenformer}) {
    const RunConfig config = run_config_of(text);
    auto model = test::plugins().family(config.model.family).build(*config.model.spec, 1);
    auto classifier = as_image_classifier(model, "the test");
    const PatchGrid grid = classifier->patch_grid();
    EXPECT_EQ(grid.rows, 4);
    EXPECT_EQ(grid.cols, 4);
    EXPECT_EQ(grid.leading, 1);
    const torch::Tensor images = fixed_images(8, 2);
    const torch::Tensor labels = torch::arange(8) % 10;
    EXPECT_EQ(model->forward(images).sizes(), (std::vector<std::int64_t>{8, 10}));
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(3e-3));
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
      loss.backward();
      optimizer.step();
      (step == 0 ? first : last) = loss.item<double>();
    }
    EXPECT_LT(last, 0.5 * first) << config.model.family << ": " << first << " -> " << last;
  }
  // tfw smoke trains either task on random data: an image model on random images.
  for (const char* text : {kVit, kTokenformer}) {
    const ModelConfig config = test::config_from_text(text);
    SmokeOptions options;
    options.steps = 20;
    options.batch = 4;
    options.lr = 3e-3;
    const SmokeResult smoke = model_smoke(test::plugins(), config, options);
    EXPECT_EQ(smoke.parameters, config.spec->parameter_count());
    ASSERT_EQ(smoke.losses.size(), 20U);
    EXPECT_LT(smoke.losses.back(), smoke.losses.front()) << config.family;  // the same 4 images every step
  }
  // A language model's commands refuse an image model with the reason.
  auto vit = test::plugins().family("vit").build(*run_config_of(kVit).model.spec, 0);
  EXPECT_THROW(as_language_model(vit, "tfw sample"), UsageError);
}

// One model of `text` in float64 with its images, and where its reference is written.
struct Case {
  std::string label, dir;
  std::shared_ptr<Model> model;
  torch::Tensor images, labels;
};

Case reference_case(const std::string& label, const std::string& text) {
  const RunConfig config = run_config_of(text);
  Case c;
  c.label = label;
  c.dir = (fs::temp_directory_path() / ("tfw-vision-reference-" + label)).string();
  c.model = test::plugins().family(config.model.family).build(*config.model.spec, 3);
  c.model->to(torch::kFloat64);
  torch::manual_seed(4);
  {  // Move norms off their 1/0 init and biases off 0, so that every parameter matters.
    torch::NoGradGuard no_grad;
    for (auto& item : c.model->named_parameters()) {
      if (item.key().find("norm") != std::string::npos || item.key().find("bias") != std::string::npos) {
        item.value().add_(torch::randn_like(item.value()) * 0.1);
      }
    }
  }
  c.images = fixed_images(3, 5).to(torch::kFloat64);
  c.labels = torch::tensor({3, 0, 9}, torch::kInt64);
  std::vector<double> pixels(c.images.data_ptr<double>(), c.images.data_ptr<double>() + c.images.numel());
  nlohmann::json image_rows = nlohmann::json::array();  // (B, 1, 28, 28)
  for (std::int64_t b = 0; b < 3; ++b) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::int64_t y = 0; y < 28; ++y) {
      rows.push_back(std::vector<double>(pixels.begin() + (b * 28 + y) * 28, pixels.begin() + (b * 28 + y + 1) * 28));
    }
    image_rows.push_back(nlohmann::json::array({rows}));
  }
  const nlohmann::json meta = {
      {"model", test::toml_to_json(config.model.spec->to_toml())}, {"images", image_rows}, {"labels", {3, 0, 9}}};
  test::python_reference_inputs(c.dir, meta, *c.model);
  return c;
}

// The cases' references in one Python process, then each model's forward and backward against its own.
void check_against_python(const std::vector<Case>& cases) {
  test::check_references("vision_reference.py", cases, [](const Case& c, const std::vector<double>& reference) {
    const torch::Tensor logits = c.model->forward(c.images);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, c.labels);
    loss.backward();
    test::expect_matches_reference(reference, logits, loss, *c.model);
  });
}

TEST(Vision, TokenformerMatchesIndependentPythonImplementation) {
  const std::string keys = "[model.init]\nkey_std = 0.3\nvalue_std = 0.3\n";
  check_against_python(
      {reference_case("vision-tokenformer", std::string(kTokenformer) + keys),
       reference_case("vision-tokenformer-pattention-ends-mean-gelu_l1",
                      std::string(kTokenformer) +
                          "patch_embed = \"pattention\"\nn_patch = 30\nhead = \"pattention\"\nn_head = 8\n"
                          "pool = \"mean\"\n" +
                          keys + "[model.pattention]\nnorm = \"gelu_l1\"\n[model.layernorm]\naffine = true\n"),
       reference_case("vision-tokenformer-softmax",
                      std::string(kTokenformer) + keys + "[model.pattention]\nnorm = \"softmax\"\n"),
       reference_case("vision-tokenformer-gelu_l2",
                      std::string(kTokenformer) + keys + "[model.pattention]\nnorm = \"gelu_l2\"\n")});
}

TEST(Vision, VitMatchesIndependentPythonImplementation) {
  check_against_python(
      {reference_case("vit", std::string(kVit) + "[model.init]\nstd = 0.2\n"),
       reference_case("vit-mean-patch4", std::string(kVit) + "patch = 4\npool = \"mean\"\n[model.init]\nstd = 0.2\n")});
}

// pattention_grow adds zero-key tokens to every block's Pattention: the logits do not change
// (float64), the Pattention patch embedding and head keep their tokens.
TEST(Vision, PattentionGrowIsExactOnTheVisionTokenformer) {
  const std::string base =
      std::string(kTokenformer) + "patch_embed = \"pattention\"\nn_patch = 30\nhead = \"pattention\"\nn_head = 8\n";
  const RunConfig from = run_config_of(base);
  const RunConfig to = run_config_of(base, {"model.n_attn=20", "model.n_ffn=36"});
  const Registry& registry = test::plugins();
  const GrowthMethod& method = registry.growth_method("pattention_grow");
  ASSERT_TRUE(method.grows("vision_tokenformer"));
  const GrowthPlan plan = method.plan(*from.model.spec, *to.model.spec, toml::table{});
  EXPECT_TRUE(plan.exact);
  auto model = registry.family("vision_tokenformer").build(*from.model.spec, 7);
  model->to(torch::kFloat64);
  const torch::Tensor images = fixed_images(4, 8).to(torch::kFloat64);
  const torch::Tensor before = model->forward(images).detach();
  auto grown =
      method.apply(*model, registry.family("vision_tokenformer"), *from.model.spec, *to.model.spec, toml::table{}, 9);
  const torch::Tensor after = grown->forward(images).detach();
  EXPECT_LT(test::max_abs_diff(before, after), 1e-12);
  std::int64_t count = 0;
  for (const auto& p : grown->parameters()) count += p.numel();
  EXPECT_EQ(count, to.model.spec->parameter_count());
  for (const auto& item : grown->named_parameters()) {
    if (item.key() == "patch_embed.keys") {
      EXPECT_EQ(item.value().size(0), 30);
    }
    if (item.key() == "head.keys") {
      EXPECT_EQ(item.value().size(0), 8);
    }
    if (item.key() == "layers.1.ffn.keys") {
      EXPECT_EQ(item.value().size(0), 36);
    }
    if (item.key() == "layers.0.q.keys") {
      EXPECT_EQ(item.value().size(0), 20);
    }
  }
  // The image skeleton is kept: another patch size or head is not a token growth.
  EXPECT_THROW(method.plan(*from.model.spec, *run_config_of(base, {"model.n_head=9"}).model.spec, toml::table{}),
               UsageError);
  EXPECT_THROW(method.plan(*from.model.spec, *run_config_of(base, {"model.patch=4"}).model.spec, toml::table{}),
               UsageError);
}

// A dataset of 3 training and 2 test images, 2×2 pixels, written as plain IDX by hand.
std::string tiny_dataset() {
  const fs::path dir = fs::temp_directory_path() / "tfw-test-tiny-images";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, std::vector<int> bytes) {
    std::ofstream out(dir / name, std::ios::binary);
    for (int b : bytes) out.put(static_cast<char>(b));
  };
  write("train-images-idx3-ubyte", {0, 0,  8,   3,   0,   0,   0, 3, 0,  0,  0,  2, 0, 0, 0, 2,  //
                                    0, 51, 102, 153, 255, 255, 0, 0, 10, 20, 30, 40});
  write("train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 3, 2, 0, 1});
  write("t10k-images-idx3-ubyte", {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8});
  write("t10k-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 2, 1, 1});
  return dir.string();
}

TEST(VisionData, HandWrittenDatasetSplitsAndNormalises) {
  ImageDataConfig config;
  config.dataset = tiny_dataset();
  ImageSplits splits = image_splits_load(config);
  EXPECT_EQ(splits.train.count, 3);
  EXPECT_EQ(splits.validation.count, 2);
  EXPECT_EQ(splits.classes, 3);
  // The training pixels over 255: 0, .2, .4, .6, 1, 1, 0, 0, 10/255, 20/255, 30/255, 40/255.
  double sum = 0, squares = 0;
  for (int p : {0, 51, 102, 153, 255, 255, 0, 0, 10, 20, 30, 40}) {
    sum += p / 255.0;
    squares += (p / 255.0) * (p / 255.0);
  }
  EXPECT_NEAR(splits.mean, sum / 12, 1e-15);
  EXPECT_NEAR(splits.std, std::sqrt(squares / 12 - (sum / 12) * (sum / 12)), 1e-15);
  config.validation = "tuning";
  config.tuning_size = 1;
  splits = image_splits_load(config);
  EXPECT_EQ(splits.train.count, 2);
  ASSERT_EQ(splits.validation.count, 1);
  EXPECT_EQ(splits.validation.labels[0], 1);  // the last training image
  EXPECT_EQ(splits.validation.pixels[0], 10);
  config.tuning_size = 3;
  EXPECT_THROW(image_splits_load(config), UsageError);
  config.dataset = "/no/such/dataset";
  EXPECT_THROW(image_splits_load(config), UsageError);
}

// A truncated file gets an error naming it.
TEST(VisionData, TruncatedImagesFileIsAClearError) {
  const std::string dir = tiny_dataset() + "-truncated";
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(tiny_dataset())) {
    fs::copy_file(entry.path(), fs::path(dir) / entry.path().filename(), fs::copy_options::overwrite_existing);
  }
  fs::resize_file(fs::path(dir) / "train-images-idx3-ubyte", 20);
  ImageDataConfig config;
  config.dataset = dir;
  try {
    image_splits_load(config);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("train-images-idx3-ubyte"), std::string::npos) << e.what();
  }
}

TEST(VisionData, FashionMnistSplitsAndStatistics) {
  ImageDataConfig config;
  const ImageSplits test_split = image_splits_load(config);
  EXPECT_EQ(test_split.train.count, 60000);
  EXPECT_EQ(test_split.validation.count, 10000);
  EXPECT_EQ(test_split.train.height, 28);
  EXPECT_EQ(test_split.classes, 10);
  // Fashion-MNIST's training pixels: mean 0.2860, standard deviation 0.3530 (widely quoted).
  EXPECT_NEAR(test_split.mean, 0.2860, 5e-5);
  EXPECT_NEAR(test_split.std, 0.3530, 5e-5);
  config.validation = "tuning";
  const ImageSplits tuning = image_splits_load(config);
  EXPECT_EQ(tuning.train.count, 50000);
  EXPECT_EQ(tuning.validation.count, 10000);
  EXPECT_TRUE(std::equal(tuning.validation.labels.begin(), tuning.validation.labels.end(),
                         test_split.train.labels.begin() + 50000));
}

// Batches are deterministic in the seed; a flip mirrors the image, a crop shifts it over zero
// padding; a data-parallel rank's rows are the same rows of the global batch.
TEST(VisionData, BatchesAreDeterministicAndAugmentedAsSaid) {
  RunConfig plain = run_config_of(std::string(kVit) + "[train]\nmax_steps = 1\n");
  auto a = task_data_open(plain, "", 8, 17, 5);
  auto b = task_data_open(plain, "", 8, 17, 5);
  const Batch first = a->next(8, 0, 8);
  EXPECT_TRUE(torch::equal(first.input, b->next(8, 0, 8).input));
  const std::string state = a->sampler_state();
  const Batch second = a->next(8, 0, 8);
  b->sampler_restore(state);
  const Batch rows = b->next(8, 2, 3);
  EXPECT_TRUE(torch::equal(rows.input, second.input.narrow(0, 2, 3)));
  EXPECT_TRUE(torch::equal(rows.target, second.target.narrow(0, 2, 3)));
  EXPECT_EQ(first.input.sizes(), (std::vector<std::int64_t>{8, 1, 28, 28}));

  // The training images, normalised as batches are: (60000, 28, 28).
  const ImageSplits splits = image_splits_load(plain.data.image);
  const torch::Tensor all = ((torch::from_blob(const_cast<std::uint8_t*>(splits.train.pixels.data()),
                                               {splits.train.count, 28, 28}, torch::kUInt8)
                                      .to(torch::kFloat64) /
                                  255.0 -
                              splits.mean) /
                             splits.std)
                                .to(torch::kFloat32);
  const torch::Tensor labels =
      torch::from_blob(const_cast<std::uint8_t*>(splits.train.labels.data()), {splits.train.count}, torch::kUInt8)
          .to(torch::kInt64);
  auto of_label = [&](std::int64_t label) { return all.index({labels == label}); };  // (~6000, 28, 28)
  auto found_in = [](const torch::Tensor& set, const torch::Tensor& image) {
    return (set == image.unsqueeze(0)).flatten(1).all(1).any().item<bool>();
  };
  auto found_in_dataset = [&](const torch::Tensor& image, std::int64_t label) {  // (28, 28)
    return found_in(of_label(label), image);
  };
  // Without augmentation every image is a dataset image; with flip, each is one or its mirror
  // (and some are mirrored).
  for (std::int64_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(found_in_dataset(first.input[i][0], first.target[i].item<std::int64_t>())) << i;
  }
  RunConfig flipped = run_config_of(std::string(kVit) + "[data]\nflip = true\n[train]\nmax_steps = 1\n");
  const Batch with = task_data_open(flipped, "", 32, 17, 5)->next(32, 0, 32);
  int mirrored = 0;
  for (std::int64_t i = 0; i < 32; ++i) {
    const torch::Tensor image = with.input[i][0];
    const std::int64_t label = with.target[i].item<std::int64_t>();
    const bool as_is = found_in_dataset(image, label), mirror = found_in_dataset(image.flip({1}), label);
    EXPECT_TRUE(as_is || mirror) << "image " << i << " is neither a dataset image nor its mirror";
    mirrored += !as_is && mirror;
  }
  EXPECT_GT(mirrored, 5);

  // Crop: each image is a dataset image shifted by at most crop_pad pixels, zeros (the
  // normalised 0) coming in at the edges; some are shifted.
  RunConfig cropped = run_config_of(std::string(kVit) + "[data]\ncrop_pad = 2\n[train]\nmax_steps = 1\n");
  const Batch crops = task_data_open(cropped, "", 16, 17, 6)->next(16, 0, 16);
  const float zero = static_cast<float>((0.0 - splits.mean) / splits.std);
  int shifted = 0;
  for (std::int64_t i = 0; i < 16; ++i) {
    // Undo each possible shift: the source image at (y + dy, x + dx) holds crop pixel (y, x);
    // a shift that brings in a padded edge can only be checked where the crop shows the image.
    bool found = false;
    const torch::Tensor same_label = of_label(crops.target[i].item<std::int64_t>());
    for (int dy = -2; dy <= 2 && !found; ++dy) {
      for (int dx = -2; dx <= 2 && !found; ++dx) {
        const torch::Tensor crop = crops.input[i][0];
        // The crop's padded border must be exactly the normalised zero.
        const torch::Tensor inner =
            crop.narrow(0, std::max(0, -dy), 28 - std::abs(dy)).narrow(1, std::max(0, -dx), 28 - std::abs(dx));
        const torch::Tensor source =
            same_label.narrow(1, std::max(0, dy), 28 - std::abs(dy)).narrow(2, std::max(0, dx), 28 - std::abs(dx));
        const torch::Tensor match = (source == inner.unsqueeze(0)).flatten(1).all(1);
        if (!match.any().item<bool>()) continue;
        torch::Tensor border = crop.clone();
        border.narrow(0, std::max(0, -dy), 28 - std::abs(dy))
            .narrow(1, std::max(0, -dx), 28 - std::abs(dx))
            .fill_(zero);
        if ((border == zero).all().item<bool>()) {
          found = true;
          shifted += dy != 0 || dx != 0;
        }
      }
    }
    EXPECT_TRUE(found) << "image " << i << " is not a crop of a dataset image";
  }
  EXPECT_GT(shifted, 8);
}

// A few hundred steps on Fashion-MNIST: test accuracy above 75% (a linear classifier gets
// about 84%). Both families, the official test split as validation.
TEST(VisionTraining, FewHundredStepsPassSeventyFivePercent) {
  // d 32, 4 heads, 7×7 patches (17 tokens); init.std 0.1 (the 0.02 of ViT-B is too small at
  // this width); the whole test split (79 batches of 128 cover its 10,000 images).
  const char* training = R"(
[train]
batch_size = 128
lr = 3e-3
warmup_steps = 20
max_steps = 300
eval_every = 300
eval_batches = 79
checkpoint_every = 300
peak_flops = 1e11
weight_decay = 0.05
)";
  const std::string model = "layers = 2\nd = 32\nheads = 4\n";
  for (const std::string& text :
       {"family = \"vision_tokenformer\"\n[model]\n" + model + "n_attn = 32\nn_ffn = 64\n[model.init]\nstd = 0.1\n" +
            training,
        "family = \"vit\"\n[model]\n" + model + "d_ffn = 64\n[model.init]\nstd = 0.1\n" + training}) {
    const RunConfig config = run_config_of(text);
    TrainOptions options;
    options.home = (fs::temp_directory_path() / "tfw-test-vision-home").string();
    options.run_dir = (fs::path(options.home) / ("run-" + config.model.family)).string();
    fs::remove_all(options.run_dir);
    fs::create_directories(options.run_dir);
    const TrainSummary summary = train_run(test::plugins(), config, options);
    EXPECT_EQ(summary.steps, 300);
    EXPECT_EQ(summary.examples, 300 * 128);
    EXPECT_EQ(summary.tokens, 300 * 128 * 17);
    const double flops = static_cast<double>(config.model.spec->flops_per_token(17).training_per_example()) * 128 * 300;
    EXPECT_DOUBLE_EQ(summary.flops, flops);
    ASSERT_EQ(summary.val_metrics.size(), 2U);
    EXPECT_EQ(summary.val_metrics[1].key, "accuracy");
    const double accuracy = summary.val_metrics[1].value;
    std::printf("%s: test accuracy %.4f, loss %.4f after 300 steps of 128 (the 10,000 test images)\n",
                config.model.family.c_str(), accuracy, summary.val_loss);
    EXPECT_GT(accuracy, 0.75) << config.model.family;
  }
}

}  // namespace test_vision
}  // namespace tfw
