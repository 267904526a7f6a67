// Growth methods, table-driven (docs/design/GROWTH.md §4; one case per row, its tolerance beside it):
// logits of the small and the grown model on random token ids in float64 and float32,
// exact where the method declares it and demonstrably not exact where it does not. Then
// the symmetry-breaking and optimiser-state rows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/error.h"
#include "engine/nn/growth.h"
#include "engine/nn/model.h"
#include "tests/plugins/growth_cases.h"
#include "tests/support.h"

namespace tfw {
namespace test_growth {

using test::grow;
using test::Grown;
using test::growth_cases;
using test::GrowthCase;
using test::tokenformer;
using test::transformer;

double logit_difference(Grown& g, std::uint64_t seed, double* scale) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  torch::Tensor ids = torch::randint(30, {2, 16}, torch::kInt64);
  torch::Tensor a = g.small->forward(ids), b = g.grown->forward(ids);
  *scale = a.abs().max().item<double>();
  return test::max_abs_diff(a, b);
}

TEST(Growth, EveryCaseIsExactExactlyWhereDeclared) {
  for (const GrowthCase& c : growth_cases()) {
    for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
      SCOPED_TRACE(c.name + (dtype == torch::kFloat64 ? " float64" : " float32"));
      for (std::uint64_t seed : {1, 2, 3}) {
        Grown g = grow(c, dtype, seed);
        EXPECT_EQ(g.plan.exact, c.exact) << "declared exactness";
        double scale = 0;
        const double diff = logit_difference(g, seed, &scale);
        if (c.exact) {
          const double tolerance = dtype == torch::kFloat64 ? c.float64_tolerance : c.float32_tolerance * (1 + scale);
          EXPECT_LE(diff, tolerance) << "seed " << seed << ", logits up to " << scale;
        } else {
          EXPECT_GT(diff, 1e-3) << "seed " << seed;
        }
        // Row 7: parameter count and shapes of the grown model match the target config.
        std::int64_t count = 0;
        for (const auto& p : g.grown->parameters()) count += p.numel();
        EXPECT_EQ(count, g.to.spec->parameter_count());
      }
    }
  }
}

// A grown model written as a checkpoint and read into a fresh model of the target config
// computes the same logits (what `tfw grow` writes is what it checked).
TEST(Growth, GrownCheckpointsReadBackExactly) {
  const std::string dir = (std::filesystem::temp_directory_path() / "tfw-test-growth-checkpoints").string();
  for (const GrowthCase& c : growth_cases()) {
    SCOPED_TRACE(c.name);
    Grown g = grow(c, torch::kFloat64, 1);
    std::filesystem::remove_all(dir);
    CheckpointMeta meta;
    const std::string path = checkpoint_save(dir, *g.grown, nullptr, meta).path;
    auto read = test::plugins().family(g.to.family).build(*g.to.spec, 7);
    read->to(torch::kFloat64);
    checkpoint_load(path, *read, nullptr);
    torch::NoGradGuard no_grad;
    const torch::Tensor ids = torch::randint(30, {2, 16}, torch::kInt64);
    EXPECT_TRUE(torch::equal(read->forward(ids), g.grown->forward(ids)))
        << test::max_abs_diff(read->forward(ids), g.grown->forward(ids));
    auto a = parameters_by_name(*read), b = parameters_by_name(*g.grown);
    for (const auto& [name, t] : a) {
      if (!torch::equal(t, b.at(name))) ADD_FAILURE() << name << " differs by " << test::max_abs_diff(t, b.at(name));
    }
    for (const auto& item : read->named_buffers()) {
      for (const auto& other : g.grown->named_buffers()) {
        if (other.key() == item.key() && !torch::equal(other.value(), item.value()))
          ADD_FAILURE() << "buffer " << item.key();
      }
    }
  }
}

TEST(Growth, GrownShapesEqualAFreshTargetModel) {
  for (const GrowthCase& c : growth_cases()) {
    SCOPED_TRACE(c.name);
    Grown g = grow(c, torch::kFloat64, 1);
    auto fresh = test::plugins().family(g.to.family).build(*g.to.spec, 0);
    auto grown = parameters_by_name(*g.grown);
    for (const auto& item : fresh->named_parameters()) {
      ASSERT_TRUE(grown.count(item.key())) << item.key();
      EXPECT_EQ(grown.at(item.key()).sizes(), item.value().sizes()) << item.key();
    }
  }
}

TEST(Growth, PattentionGrowNewKeysGetGradient) {  // row 2
  GrowthCase c{"zero keys", tokenformer(12, 20), tokenformer(20, 32), "pattention_grow", "", true};
  Grown g = grow(c, torch::kFloat64, 1);
  torch::Tensor ids = torch::randint(30, {2, 17}, torch::kInt64);
  torch::nn::functional::cross_entropy(g.grown->forward(ids.narrow(1, 0, 16)).reshape({-1, 30}),
                                       ids.narrow(1, 1, 16).reshape({-1}))
      .backward();
  for (const auto& item : g.grown->named_parameters()) {
    if (item.key().find(".keys") == std::string::npos) continue;
    const std::int64_t old_rows = item.key().find(".ffn.") != std::string::npos ? 20 : 12;
    torch::Tensor new_rows = item.value().grad().narrow(0, old_rows, item.value().size(0) - old_rows);
    EXPECT_GT(new_rows.abs().max().item<double>(), 0.0) << item.key();
  }
}

torch::Tensor block(const torch::Tensor& w, std::int64_t rows, std::int64_t cols, std::int64_t i, std::int64_t j) {
  return w.narrow(0, i * rows, rows).narrow(1, j * cols, cols);
}

TEST(Growth, HyperCloningNoiseDiffersFromTheCloneAndBreaksTheSymmetry) {  // rows 3 and 4
  auto clone_and_step = [](const std::string& options) {
    GrowthCase c{"", transformer(8, 2, 12), transformer(16, 4, 24), "hypercloning", options, true};
    Grown g = grow(c, torch::kFloat64, 1);
    torch::optim::AdamW optimizer(g.grown->parameters(), torch::optim::AdamWOptions(1e-2));
    torch::manual_seed(9);
    torch::Tensor ids = torch::randint(30, {2, 17}, torch::kInt64);
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(g.grown->forward(ids.narrow(1, 0, 16)).reshape({-1, 30}),
                                         ids.narrow(1, 1, 16).reshape({-1}))
        .backward();
    optimizer.step();
    return parameters_by_name(*g.grown);
  };
  auto plain = clone_and_step("noise = false");
  auto noisy = clone_and_step("noise = true");
  // Q (16, 16) is 2 x 2 blocks of (8, 8): without noise every block stays the (0, 0) block.
  const torch::Tensor q = plain.at("layers.0.q.weight");
  const torch::Tensor up = plain.at("layers.1.ffn_up.weight");  // (24, 16): 2 x 2 blocks of (12, 8)
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 2; ++j) {
      EXPECT_LT(test::max_abs_diff(block(q, 8, 8, i, j), block(q, 8, 8, 0, 0)), 1e-12);
      EXPECT_LT(test::max_abs_diff(block(up, 12, 8, i, j), block(up, 12, 8, 0, 0)), 1e-12);
    }
  }
  const torch::Tensor noisy_q = noisy.at("layers.0.q.weight");
  EXPECT_GT(test::max_abs_diff(block(noisy_q, 8, 8, 0, 1), block(noisy_q, 8, 8, 0, 0)), 1e-3);
  EXPECT_GT(test::max_abs_diff(noisy_q, q), 1e-3);
}

TEST(Growth, AdamWStateExtensionKeepsOldMomentsBitIdentical) {
  ModelConfig from = test::config_from_text(tokenformer(12, 20)), to = test::config_from_text(tokenformer(20, 32));
  const ModelFamily& family = test::plugins().family("tokenformer");
  auto model = family.build(*from.spec, 1);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    model->forward(torch::randint(30, {2, 8}, torch::kInt64)).square().mean().backward();
    optimizer.step();
  }
  auto moments = [&] {
    std::map<std::string, std::pair<torch::Tensor, std::int64_t>> out;
    for (const auto& item : model->named_parameters()) {
      auto& state =
          static_cast<torch::optim::AdamWParamState&>(*optimizer.state().at(item.value().unsafeGetTensorImpl()));
      out[item.key()] = {state.exp_avg().clone(), state.step()};
    }
    return out;
  };
  auto before = moments();
  test::plugins().growth_method("pattention_grow").apply(*model, family, *from.spec, *to.spec, toml::table{}, 5);
  optimizer_extend_rows(optimizer);
  auto after = moments();
  for (const auto& [name, old] : before) {
    const torch::Tensor& now = after.at(name).first;
    EXPECT_TRUE(torch::equal(now.narrow(0, 0, old.first.size(0)), old.first)) << name;
    EXPECT_EQ(after.at(name).second, old.second) << name;
    if (now.size(0) > old.first.size(0)) {
      EXPECT_EQ(now.narrow(0, old.first.size(0), now.size(0) - old.first.size(0)).abs().max().item<double>(), 0.0);
    }
  }
  // The optimiser steps on with the grown parameters.
  optimizer.zero_grad();
  model->forward(torch::randint(30, {2, 8}, torch::kInt64)).square().mean().backward();
  EXPECT_NO_THROW(optimizer.step());
}

// msg's masks ramp from 0 to 1: equal to the small model at the growth, different mid-ramp,
// and once the ramp is over the grown model is a plain Transformer of the target size with the
// same weights (the masks are gone, not merely near 1).
TEST(Growth, MsgMasksRampFromZeroToOne) {
  GrowthCase c{"msg", transformer(8, 2, 12, true), transformer(12, 3, 20, true, 3), "msg", "ramp_steps = 10", true};
  Grown g = grow(c, torch::kFloat64, 4);
  double scale = 0;
  EXPECT_LE(logit_difference(g, 9, &scale), 1e-10);
  g.grown->set_training_step(5);  // c = 0.5
  EXPECT_GT(logit_difference(g, 9, &scale), 1e-3);
  g.grown->set_training_step(10);  // c = 1
  ModelConfig plain = test::config_from_text(c.to);
  auto reference = test::plugins().family("transformer").build(*plain.spec, 1);
  reference->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    auto grown = g.grown->named_parameters();
    for (auto& item : reference->named_parameters()) item.value().copy_(grown[item.key()]);
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::randint(30, {2, 16}, torch::kInt64);
  EXPECT_LE(test::max_abs_diff(reference->forward(ids), g.grown->forward(ids)), 1e-12);
  g.grown->set_training_step(400);  // long after the ramp: still the plain model
  EXPECT_LE(test::max_abs_diff(reference->forward(ids), g.grown->forward(ids)), 1e-12);
  // Mid-ramp, the masked LayerNorm weighs the new dims by c: the grown model lies between.
  g.grown->set_training_step(3);
  EXPECT_GT(test::max_abs_diff(reference->forward(ids), g.grown->forward(ids)), 1e-3);
}

TEST(Growth, ImpossibleTargetsAreRefusedWithTheReason) {
  auto refuse = [](const std::string& from, const std::string& to, const std::string& method,
                   const std::string& options, const std::string& expected) {
    ModelConfig a = test::config_from_text(from), b = test::config_from_text(to);
    try {
      test::plugins().growth_method(method).plan(*a.spec, *b.spec, toml::parse(options));
      ADD_FAILURE() << "expected a UsageError for " << expected;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refuse(transformer(8, 2, 12), transformer(12, 3, 12), "hypercloning", "", "integer multipliers: d 8 -> 12 is x1.500");
  refuse(transformer(8, 2, 12), transformer(16, 2, 12), "hypercloning", "", "heads must become 2 x 2 = 4");
  refuse(transformer(8, 2, 12), transformer(16, 4, 24), "hypercloning", "tie = \"untie\"", "untied output head");
  refuse(tokenformer(12, 20), tokenformer(20, 32), "pattention_grow", "key_init = \"zero\"\nvalue_init = \"zero\"",
         "dead tokens");
  refuse(tokenformer(12, 20), tokenformer(8, 32), "pattention_grow", "", "only adds tokens");
  refuse(tokenformer(12, 20), tokenformer(20, 32), "pattention_grow", "colour = 1", "unknown key 'options.colour'");
  refuse(transformer(8, 2, 12), transformer(8, 2, 10), "net2net", "", "only widens: d_ffn 12 -> 10");
  refuse(transformer(8, 2, 12), tokenformer(20, 32), "net2net", "", "net2net grows transformer models");
  refuse(transformer(8, 2, 12, false, 4), transformer(8, 2, 12, false, 2), "depth_grow", "",
         "depth_grow adds layers: layers 4 -> 2");
  refuse(transformer(8, 2, 12), transformer(12, 3, 12, false, 4), "depth_grow", "",
         "changes only the number of layers");
  refuse(tokenformer(12, 20), tokenformer(12, 20, "l2_gelu", "fixed", 3), "stack", "",
         "stack repeats the whole stack: layers 2 -> 3 is not a multiple");
  refuse(tokenformer(12, 20), tokenformer(20, 32), "msg", "", "msg grows transformer models, not tokenformer");
  refuse(transformer(8, 2, 12), transformer(6, 2, 12), "msg", "", "msg only grows: d 8 -> 6");
  refuse(transformer(8, 2, 12), transformer(8, 2, 12), "msg", "", "nothing grows");
  refuse(transformer(8, 2, 12), transformer(12, 3, 20, true), "msg", "", "msg keeps linear.bias");
  refuse(transformer(8, 2, 12), transformer(12, 3, 20), "msg", "ramp_steps = 0", "ramp_steps");
}

}  // namespace test_growth
}  // namespace tfw
