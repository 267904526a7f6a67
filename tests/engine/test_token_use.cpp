// Growth diagnostics (engine/nn/token_use.h, issue 37) against cases computed by hand and a float64
// recomputation from the captured scores: new tokens with zero keys take no score mass; new
// tokens that copy the old ones take exactly half; a model that never grew has nothing to say.
#include <gtest/gtest.h>

#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/nn/token_use.h"
#include "tests/support.h"

namespace tfw {
namespace test_token_use {

std::shared_ptr<Model> tiny_model() {
  const ModelConfig config = test::config_from_text(test::TinyModel{"tokenformer", 16, 2, 30, 8, 12}.toml());
  return test::plugins().family("tokenformer").build(*config.spec, 3);
}

std::vector<PattentionImpl*> layers_of(Model& model) {
  std::vector<PattentionImpl*> layers;
  for (const auto& item : model.named_modules()) {
    if (auto* layer = dynamic_cast<PattentionImpl*>(item.value().get())) layers.push_back(layer);
  }
  return layers;
}

double value_of(const std::vector<Metric>& metrics, const std::string& key) {
  for (const Metric& m : metrics) {
    if (m.key == key) return m.value;
  }
  ADD_FAILURE() << "no metric " << key;
  return std::nan("");
}

// Runs `ids` through `model` with the meter listening; returns its metrics.
std::vector<Metric> measured(Model& model, const torch::Tensor& ids) {
  TokenUseMeter meter(model);
  torch::NoGradGuard no_grad;
  {
    ScoreCapture capture(meter.sink());
    model.forward(ids);
  }
  return meter.metrics();
}

TEST(TokenUse, AModelThatNeverGrewHasNoAppendedTokens) {
  auto model = tiny_model();
  EXPECT_TRUE(TokenUseMeter(*model).empty());
}

TEST(TokenUse, ZeroKeysTakeNoMassAndCopiesTakeExactlyHalf) {
  torch::manual_seed(1);
  const torch::Tensor ids = torch::randint(30, {2, 7}, torch::kInt64);
  {  // Appended tokens with zero keys (pattention_grow's): scores 0, gelu(0) = 0.
    auto model = tiny_model();
    for (PattentionImpl* layer : layers_of(*model)) {
      layer->append_tokens(torch::zeros({4, layer->keys.size(1)}), torch::randn({4, layer->values.size(1)}));
    }
    const std::vector<Metric> metrics = measured(*model, ids);
    EXPECT_EQ(value_of(metrics, "token_use/appended_mass"), 0.0);
    EXPECT_EQ(value_of(metrics, "token_use/appended_active"), 0.0);
    EXPECT_EQ(value_of(metrics, "token_use/layers.0.q/key_norm_new"), 0.0);
    // 2 layers x 5 projections x 6 figures, and the two means.
    EXPECT_EQ(metrics.size(), 2u * 5u * 6u + 2u);
  }
  {  // Appended tokens that copy every old key: each score row is [s, s], so half the mass.
    auto model = tiny_model();
    for (PattentionImpl* layer : layers_of(*model)) {
      layer->append_tokens(layer->keys.detach().clone(), layer->values.detach().clone() * 2);
    }
    const std::vector<Metric> metrics = measured(*model, ids);
    std::map<std::string, torch::Tensor> scores;  // the scores themselves, for a float64 recomputation
    {
      torch::NoGradGuard no_grad;
      ScoreCapture all;
      model->forward(ids);
      scores = all.scores();
    }
    EXPECT_NEAR(value_of(metrics, "token_use/appended_mass"), 0.5, 1e-6);  // float32 scores
    for (PattentionImpl* layer : layers_of(*model)) {
      const std::string prefix = "token_use/" + layer->options().label() + "/";
      const std::int64_t n0 = layer->n0.item<std::int64_t>();
      EXPECT_NEAR(value_of(metrics, prefix + "appended_mass"), 0.5, 1e-6);
      EXPECT_DOUBLE_EQ(value_of(metrics, prefix + "key_norm_new"), value_of(metrics, prefix + "key_norm_old"));
      EXPECT_NEAR(value_of(metrics, prefix + "value_norm_new"), 2 * value_of(metrics, prefix + "value_norm_old"), 1e-6);
      const torch::Tensor v = layer->values.detach().to(torch::kFloat64).narrow(0, 0, n0);
      EXPECT_NEAR(value_of(metrics, prefix + "value_norm_old"), v.norm(2, {1}).mean().item<double>(), 1e-12);
      // Active: the old tokens' own rule, since each copy scores as its original.
      const torch::Tensor old =
          scores.at(layer->options().label()).to(torch::kFloat64).abs().reshape({-1, 2 * n0}).narrow(1, 0, n0);
      const double threshold = kTokenUseThreshold * old.mean().item<double>();
      const double expected = (std::get<0>(old.max(0)) > threshold).to(torch::kFloat64).mean().item<double>();
      EXPECT_NEAR(value_of(metrics, prefix + "appended_active"), expected, 1e-12);
    }
  }
}

}  // namespace test_token_use
}  // namespace tfw
