// Both model families through the registry: output shapes, causality, tied logits, the
// parameter count of the built module against the spec's formula, the tokenformer's
// layer structure, and a few optimisation steps on a fixed batch reducing the loss.
#include <gtest/gtest.h>

#include "engine/nn/attention.h"
#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/commands/smoke.h"
#include "tests/support.h"

namespace tfw {
namespace test_models {

const std::string kTokenformer = test::TinyModel{"tokenformer", 32, 4, 50, 24, 40, 16}.toml();
const std::string kTransformer = test::TinyModel{"transformer", 32, 4, 50, 0, 0, 16}.toml();

struct FamilyCase {
  const char* name;
  std::string toml;
};

std::vector<FamilyCase> family_cases() {
  return {
      {"tokenformer", kTokenformer},
      {"tokenformer affine LN", std::string(kTokenformer) + "[model.layernorm]\naffine = true\n"},
      {"tokenformer softmax sqrt_n",
       std::string(kTokenformer) + "[model.pattention]\nnorm = \"softmax\"\ntau = \"sqrt_n\"\n"},
      {"transformer", kTransformer},
      {"transformer bias head_dim",
       std::string(kTransformer) + "head_dim = 6\nd_ffn = 20\n[model.linear]\nbias = true\n"},
  };
}

std::shared_ptr<LanguageModel> build(const ModelConfig& config, std::uint64_t seed = 0) {
  return as_language_model(test::plugins().family(config.family).build(*config.spec, seed), "the test");
}

TEST(Models, ShapesAndParameterCountMatchTheSpec) {
  for (const FamilyCase& c : family_cases()) {
    SCOPED_TRACE(c.name);
    ModelConfig config = test::config_from_text(c.toml);
    auto model = build(config);
    std::int64_t counted = 0;
    for (const auto& p : model->parameters()) counted += p.numel();
    EXPECT_EQ(counted, config.spec->parameter_count());
    torch::Tensor ids = torch::randint(50, {3, 7}, torch::kInt64);
    EXPECT_EQ(model->forward(ids).sizes(), (std::vector<std::int64_t>{3, 7, 50}));
    EXPECT_EQ(model->hidden(ids).sizes(), (std::vector<std::int64_t>{3, 7, 32}));
  }
}

// The key/value cache (`tfw sample`): a prompt's forward, then one token at a time, gives the
// logits of the whole sequence's forward, in float64, for every family variant.
TEST(Models, TheKeyValueCacheGivesTheFullForwardsLogits) {
  for (const FamilyCase& c : family_cases()) {
    SCOPED_TRACE(c.name);
    auto model = build(test::config_from_text(c.toml));
    model->to(torch::kFloat64);
    torch::NoGradGuard no_grad;
    torch::Tensor ids = torch::randint(50, {2, 14}, torch::kInt64);
    const torch::Tensor full = model->forward(ids);  // (2, 14, 50)
    KVCache cache;
    std::vector<torch::Tensor> pieces = {model->forward_cached(ids.narrow(1, 0, 6), cache)};
    ASSERT_TRUE(pieces.front().defined());
    for (std::int64_t t = 6; t < 14; ++t) pieces.push_back(model->forward_cached(ids.narrow(1, t, 1), cache));
    EXPECT_EQ(cache.length, 14);
    EXPECT_LT(test::max_abs_diff(torch::cat(pieces, 1), full), 1e-10);
  }
}

TEST(Models, ChangingTokenTPlusOneLeavesLogitsUpToTUnchanged) {
  for (const FamilyCase& c : family_cases()) {
    SCOPED_TRACE(c.name);
    auto model = build(test::config_from_text(c.toml));
    model->to(torch::kFloat64);
    torch::NoGradGuard no_grad;
    torch::Tensor ids = torch::randint(50, {2, 12}, torch::kInt64);
    torch::Tensor before = model->forward(ids);
    for (int t : {0, 5, 10}) {
      torch::Tensor changed = ids.clone();
      changed.select(1, t + 1).add_(1).remainder_(50);
      torch::Tensor after = model->forward(changed);
      EXPECT_EQ(test::max_abs_diff(after.narrow(1, 0, t + 1), before.narrow(1, 0, t + 1)), 0.0) << "t = " << t;
      EXPECT_GT(test::max_abs_diff(after.narrow(1, t + 1, 1), before.narrow(1, t + 1, 1)), 1e-6) << "t = " << t;
    }
  }
}

TEST(Models, LogitsAreTiedToTheEmbedding) {
  for (const FamilyCase& c : family_cases()) {
    SCOPED_TRACE(c.name);
    auto model = build(test::config_from_text(c.toml));
    model->to(torch::kFloat64);
    torch::Tensor ids = torch::randint(50, {2, 6}, torch::kInt64);
    torch::Tensor embedding = model->token_embedding();
    EXPECT_LT(test::max_abs_diff(model->forward(ids), torch::matmul(model->hidden(ids), embedding.t())), 1e-12);
    // The embedding is the only (V, d) parameter: no separate output head.
    int vocab_sized = 0;
    for (const auto& p : model->parameters()) vocab_sized += p.dim() == 2 && p.size(0) == 50;
    EXPECT_EQ(vocab_sized, 1);
    // Gradient of the logits reaches the embedding through both uses.
    model->forward(ids).sum().backward();
    EXPECT_TRUE(embedding.grad().defined());
  }
}

TEST(Models, TokenformerHasOnlyPattentionsAndTheFinalNormAsLayers) {
  ModelConfig config = test::config_from_text(kTokenformer);
  auto model = build(config);
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  std::vector<std::string> expected = {"embedding"};
  for (int layer = 0; layer < 2; ++layer) {
    for (const char* proj : {"q", "k", "v", "o", "ffn"}) {
      expected.push_back("layers." + std::to_string(layer) + "." + proj + ".keys");
      expected.push_back("layers." + std::to_string(layer) + "." + proj + ".values");
    }
  }
  expected.push_back("final_norm.weight");
  expected.push_back("final_norm.bias");
  EXPECT_EQ(names, expected);
  // Paper init: keys std 0.02, values std 2 / (L·sqrt(d)) = 2 / (2·sqrt(32)).
  auto params = model->named_parameters();
  torch::Tensor keys = torch::cat({params["layers.0.ffn.keys"].flatten(), params["layers.1.q.keys"].flatten()});
  torch::Tensor values = torch::cat({params["layers.0.ffn.values"].flatten(), params["layers.1.o.values"].flatten()});
  EXPECT_NEAR(keys.std().item<double>(), 0.02, 0.002);
  EXPECT_NEAR(values.std().item<double>(), 2.0 / (2.0 * std::sqrt(32.0)), 0.02);
  EXPECT_EQ(params["layers.0.ffn.keys"].sizes(), (std::vector<std::int64_t>{40, 32}));
}

TEST(Models, ScoreCaptureSeesEveryPattentionOfATokenformer) {
  auto model = build(test::config_from_text(kTokenformer));
  torch::NoGradGuard no_grad;
  ScoreCapture capture;
  model->forward(torch::randint(50, {1, 9}, torch::kInt64));
  ASSERT_EQ(capture.scores().size(), 10u);  // 2 layers × (q, k, v, o, ffn)
  EXPECT_EQ(capture.scores().at("layers.1.ffn").sizes(), (std::vector<std::int64_t>{1, 9, 40}));
  EXPECT_EQ(capture.scores().at("layers.0.q").sizes(), (std::vector<std::int64_t>{1, 9, 24}));
}

TEST(Models, SameSeedSameWeights) {
  ModelConfig config = test::config_from_text(kTokenformer);
  auto a = build(config, 5), b = build(config, 5), c = build(config, 6);
  EXPECT_TRUE(torch::equal(a->token_embedding(), b->token_embedding()));
  EXPECT_FALSE(torch::equal(a->token_embedding(), c->token_embedding()));
}

TEST(Models, AFewStepsOnAFixedBatchReduceTheLoss) {
  for (const FamilyCase& c : family_cases()) {
    SCOPED_TRACE(c.name);
    SmokeOptions options;
    options.steps = 20;
    options.seq_len = 16;
    options.lr = 3e-3;
    SmokeResult result = model_smoke(test::plugins(), test::config_from_text(c.toml), options);
    ASSERT_EQ(result.losses.size(), 20u);
    EXPECT_NEAR(result.losses.front(), std::log(50.0), 0.5);  // near uniform at init
    EXPECT_LT(result.losses.back(), result.losses.front() - 0.5);
  }
}

}  // namespace test_models
}  // namespace tfw
