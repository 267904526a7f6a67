// Parameter masks (engine/nn/mask.h): a hand-computed masked case, the masked layer against a
// layer of only its active tokens in float64 (output and gradients, both implementations),
// masked tokens that cannot change anything, the optimiser hold, and bad masks.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/error.h"
#include "engine/nn/mask.h"
#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/nn/pattention_fused.h"
#include "engine/plugin/registry.h"
#include "engine/train/trainer.h"
#include "tests/support.h"

namespace tfw {
namespace test_mask {

RunConfig run_config(const std::string& text) {
  return run_config_parse(test::plugins(), toml::parse(std::string_view(text), std::string_view("mask.toml")),
                          "mask.toml");
}

// Keys (1,0), (0,1), (1,1), values 1, 2, 3, x = (1, 0): scores (1, 0, 1); n0 = 3, tau = sqrt 3.
// With token 2 masked the scores are (1, 0): l2_gelu's row norm is 1 (not sqrt 2: the masked
// token is not in the normaliser), so O = gelu(sqrt 3 / sqrt(1 + eps))·1 = 1.6599406574102062
// (gelu(sqrt 3) = 1.65994162; eps = 1e-6 under the norm moves the 7th digit); gelu_l1's
// is gelu(1) (not 2·gelu(1)): O = 3·gelu(1)/(gelu(1) + 1e-6) = 2.999996434283986.
TEST(Mask, HandComputedCase) {
  for (PattentionImplementation implementation :
       {PattentionImplementation::reference, PattentionImplementation::fused}) {
    pattention_set_implementation(implementation);
    for (const auto& [norm, expected] : {std::pair{PattentionNorm::l2_gelu, 1.6599406574102062},
                                         std::pair{PattentionNorm::gelu_l1, 2.999996434283986}}) {
      Pattention layer(PattentionOptions(2, 1, 3).norm(norm));
      layer->to(torch::kFloat64);
      {
        torch::NoGradGuard no_grad;
        layer->keys.copy_(torch::tensor({{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}}, torch::kFloat64));
        layer->values.copy_(torch::tensor({{1.0}, {2.0}, {3.0}}, torch::kFloat64));
      }
      layer->set_active_tokens(torch::tensor({0, 1}, torch::kInt64));
      EXPECT_NEAR(layer->forward(torch::tensor({{1.0, 0.0}}, torch::kFloat64)).item<double>(), expected, 1e-12)
          << pattention_norm_name(norm);
    }
  }
  pattention_set_implementation(PattentionImplementation::fused);
}

// A masked layer computes what a layer holding only its active tokens (with the same
// multiplier) computes, and its masked rows get exactly zero gradient; the active rows get
// that layer's gradient. Every norm, both implementations, float64.
TEST(Mask, EqualsALayerOfOnlyTheActiveTokens) {
  const std::int64_t d_in = 5, d_out = 4, n = 9;
  const torch::Tensor active = torch::tensor({1, 2, 3, 6, 8}, torch::kInt64);
  for (PattentionImplementation implementation :
       {PattentionImplementation::reference, PattentionImplementation::fused}) {
    pattention_set_implementation(implementation);
    for (PattentionNorm norm :
         {PattentionNorm::l2_gelu, PattentionNorm::gelu_l2, PattentionNorm::gelu_l1, PattentionNorm::softmax}) {
      SCOPED_TRACE(pattention_norm_name(norm));
      torch::manual_seed(3);
      Pattention masked(PattentionOptions(d_in, d_out, n).norm(norm).key_std(0.5).value_std(0.5));
      masked->to(torch::kFloat64);
      masked->set_active_tokens(active);
      Pattention alone(PattentionOptions(d_in, d_out, 5).norm(norm));
      alone->to(torch::kFloat64);
      {
        torch::NoGradGuard no_grad;
        alone->keys.copy_(masked->keys.index_select(0, active));
        alone->values.copy_(masked->values.index_select(0, active));
        alone->tau.copy_(masked->tau);  // the same multiplier: sqrt(n0) of the masked layer
        alone->n0.copy_(masked->n0);
      }
      const torch::Tensor x = torch::randn({2, 3, d_in}, torch::kFloat64);
      const torch::Tensor out = masked->forward(x), expected = alone->forward(x);
      EXPECT_LT(test::max_abs_diff(out, expected), 1e-13);
      const torch::Tensor weights = torch::randn({2, 3, d_out}, torch::kFloat64);
      (out * weights).sum().backward();
      (expected * weights).sum().backward();
      const torch::Tensor masked_rows = torch::tensor({0, 4, 5, 7}, torch::kInt64);
      EXPECT_EQ(masked->keys.grad().index_select(0, masked_rows).abs().max().item<double>(), 0.0);
      EXPECT_EQ(masked->values.grad().index_select(0, masked_rows).abs().max().item<double>(), 0.0);
      EXPECT_LT(test::max_abs_diff(masked->keys.grad().index_select(0, active), alone->keys.grad()), 1e-13);
      EXPECT_LT(test::max_abs_diff(masked->values.grad().index_select(0, active), alone->values.grad()), 1e-13);
      // Whatever the masked tokens hold, the output is the same, bit for bit.
      {
        torch::NoGradGuard no_grad;
        masked->keys.index_copy_(0, masked_rows, 1e3 * torch::randn({4, d_in}, torch::kFloat64));
        masked->values.index_copy_(0, masked_rows, 1e3 * torch::randn({4, d_out}, torch::kFloat64));
        EXPECT_TRUE(torch::equal(masked->forward(x), out));
      }
    }
  }
  pattention_set_implementation(PattentionImplementation::fused);
}

const char* kMaskedTokenformer = R"(
family = "tokenformer"
[model]
layers = 2
d = 16
heads = 2
n_attn = 12
n_ffn = 24
vocab = 30
seq_len = 8
[train]
max_steps = 3
[train.mask]
use = ["one"]
[train.mask.blocks]
one = { attn = [0, 4], ffn = [0, 8] }
two = { attn = [4, 8], ffn = [8, 16] }
shared = { attn = [8, 12], ffn = [16, 24], q = [8, 10] }
)";

// Every layer's active tokens follow the union of the used blocks' ranges; a projection's
// own range wins over attn.
TEST(Mask, SelectsTheUnionOfTheUsedBlocksRanges) {
  const RunConfig config = run_config(kMaskedTokenformer);
  std::shared_ptr<Model> model = test::plugins().family("tokenformer").build(*config.model.spec, 0);
  const std::string description = mask_apply(*model, config.train.mask, {"two", "shared"});
  EXPECT_EQ(description, "blocks two+shared: tokens in use ffn 32/48, k 16/24, o 16/24, q 12/24, v 16/24");
  for (const auto& item : model->named_modules()) {
    const std::string& name = item.key();
    auto* layer = dynamic_cast<PattentionImpl*>(item.value().get());
    if (layer == nullptr) continue;
    const std::string projection = pattention_projection(name);
    std::vector<std::int64_t> expected;
    if (projection == "ffn") {
      for (std::int64_t i = 8; i < 24; ++i) expected.push_back(i);
    } else if (projection == "q") {
      expected = {4, 5, 6, 7, 8, 9};
    } else {
      expected = {4, 5, 6, 7, 8, 9, 10, 11};
    }
    EXPECT_TRUE(torch::equal(layer->active_tokens(), torch::tensor(expected, torch::kInt64))) << name;
  }
  EXPECT_EQ(mask_apply(*model, config.train.mask, {}), "no mask");
  for (const auto& module : model->modules()) {
    if (auto* layer = dynamic_cast<PattentionImpl*>(module.get())) {
      EXPECT_FALSE(layer->active_tokens().defined());
    }
  }
}

// AdamW's weight decay moves tokens whose gradient is zero; the hold keeps them exactly.
TEST(Mask, MaskedTokensStayExactlyAsTheyWereThroughOptimiserSteps) {
  const RunConfig config = run_config(kMaskedTokenformer);
  for (bool hold : {true, false}) {
    std::shared_ptr<Model> model = test::plugins().family("tokenformer").build(*config.model.spec, 1);
    mask_apply(*model, config.train.mask, {"one"});
    MaskedTokenHold held(*model);
    std::vector<torch::Tensor> before;
    for (const torch::Tensor& p : model->parameters()) before.push_back(p.detach().clone());
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
    const torch::Tensor ids = torch::randint(0, 30, {2, 8}, torch::kInt64);
    for (int step = 0; step < 3; ++step) {
      optimizer.zero_grad();
      torch::nn::functional::cross_entropy(model->forward(ids).view({-1, 30}), ids.view({-1})).backward();
      if (hold) held.save();
      optimizer.step();
      if (hold) held.restore();
    }
    const torch::Tensor ffn_keys = model->named_parameters()["layers.0.ffn.keys"];
    const torch::Tensor q_values = model->named_parameters()["layers.1.q.values"];
    const auto index = model->named_parameters().keys();
    const std::size_t ffn = std::find(index.begin(), index.end(), "layers.0.ffn.keys") - index.begin();
    const std::size_t q = std::find(index.begin(), index.end(), "layers.1.q.values") - index.begin();
    using torch::indexing::Slice;
    // Block "one": ffn tokens 0..7 and attention tokens 0..3 train; the rest are masked.
    EXPECT_FALSE(torch::equal(ffn_keys.index({Slice(0, 8)}), before[ffn].index({Slice(0, 8)})));
    EXPECT_FALSE(torch::equal(q_values.index({Slice(0, 4)}), before[q].index({Slice(0, 4)})));
    EXPECT_EQ(torch::equal(ffn_keys.index({Slice(8, 24)}), before[ffn].index({Slice(8, 24)})), hold);
    EXPECT_EQ(torch::equal(q_values.index({Slice(4, 12)}), before[q].index({Slice(4, 12)})), hold);
  }
}

// Through the trainer: 40 steps with a growth event at step 20 (8 attention and 8 FFN tokens
// more, zero keys): the masked tokens of the initial model leave training exactly as they were
// built, the grown tokens (outside block one's ranges, so masked) keep their zero keys, and
// block one's tokens trained.
TEST(Mask, TheTrainerKeepsMaskedTokensThroughTrainingAndGrowth) {
  const std::string text = std::string(kMaskedTokenformer) + R"(
[data]
corpus = "kjv"
)";
  toml::table table = toml::parse(std::string_view(text), std::string_view("mask.toml"));
  config_apply_overrides(table,
                         {"model.vocab=256", "train.max_steps=40", "train.batch_size=4", "train.eval_every=20",
                          "train.eval_batches=2", "train.checkpoint_every=1000", "train.peak_flops=1e11",
                          "train.growth_repeat={every_steps=20, add_attn=8, add_ffn=8, options={key_init=\"zero\"}}"});
  const RunConfig config = run_config_parse(test::plugins(), table, "mask.toml");
  TrainOptions options;
  options.home = (std::filesystem::temp_directory_path() / "tfw-test-mask-home").string();
  options.run_dir = options.home + "/runs/masked";
  std::filesystem::remove_all(options.run_dir);
  std::filesystem::create_directories(options.run_dir);
  const TrainSummary summary = train_run(test::plugins(), config, options);
  ASSERT_EQ(summary.growth_events, 1);

  const ModelFamily& family = test::plugins().family("tokenformer");
  std::shared_ptr<Model> initial = family.build(*config.model.spec, config.train.seed);
  toml::table grown_table = table;
  config_apply_overrides(grown_table, {"model.n_attn=20", "model.n_ffn=32"});
  const RunConfig grown = run_config_parse(test::plugins(), grown_table, "mask.toml");
  std::shared_ptr<Model> trained = family.build(*grown.model.spec, 0);
  checkpoint_load(summary.last_checkpoint, *trained, nullptr);
  using torch::indexing::Slice;
  auto start = initial->named_parameters(), end = trained->named_parameters();
  for (const char* name : {"layers.0.q.keys", "layers.1.o.values", "layers.1.ffn.keys", "layers.0.ffn.values"}) {
    SCOPED_TRACE(name);
    const bool ffn = std::string(name).find("ffn") != std::string::npos;
    const std::int64_t used = ffn ? 8 : 4, built = ffn ? 24 : 12;
    EXPECT_FALSE(torch::equal(end[name].index({Slice(0, used)}), start[name].index({Slice(0, used)})));
    EXPECT_TRUE(torch::equal(end[name].index({Slice(used, built)}), start[name].index({Slice(used, built)})));
    if (std::string(name).find("keys") != std::string::npos) {
      EXPECT_EQ(end[name].index({Slice(built, torch::indexing::None)}).abs().max().item<double>(), 0.0);
    }
  }
}

TEST(Mask, BadMasksAreClearErrors) {
  auto error_of = [](const std::string& text, const std::vector<std::string>& use) -> std::string {
    try {
      const RunConfig config = run_config(text);
      std::shared_ptr<Model> model = test::plugins().family(config.model.family).build(*config.model.spec, 0);
      mask_apply(*model, config.train.mask, use);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string base(kMaskedTokenformer);
  // A used block that is not defined: an error of the config, with its place.
  std::string text = base;
  text.replace(text.find("use = [\"one\"]"), 13, "use = [\"oen\"]");
  EXPECT_NE(error_of(text, {}).find("mask.toml:14:7: train.mask.use: no block named 'oen'"), std::string::npos)
      << error_of(text, {});
  // A range past the layer's tokens, a projection no layer has, an empty range.
  EXPECT_NE(error_of(base + "far = { ffn = [20, 30] }\n", {"far"}).find("goes past layers.0.ffn's 24 tokens"),
            std::string::npos);
  EXPECT_NE(error_of(base + "odd = { mlp = [0, 4] }\n", {"odd"}).find("names projection 'mlp', which no Pattention"),
            std::string::npos);
  EXPECT_NE(error_of(base + "nil = { ffn = [4, 4] }\n", {}).find("the range [4, 4] is empty"), std::string::npos);
  EXPECT_NE(error_of(base + "bad = { ffn = 4 }\n", {}).find("expected a token range [start, end]"), std::string::npos);
  EXPECT_NE(error_of(base, {"three"}).find("no parameter block named 'three'"), std::string::npos);
  // A Transformer has no parameter tokens to mask.
  const std::string transformer = R"(
family = "transformer"
[model]
layers = 1
d = 16
heads = 2
vocab = 30
[train]
max_steps = 3
[train.mask]
use = ["a"]
blocks = { a = { ffn = [0, 4] } }
)";
  EXPECT_NE(error_of(transformer, {"a"}).find("this model has no Pattention layers"), std::string::npos);
}

}  // namespace test_mask
}  // namespace tfw
