// The language model's loss (engine/train/lm_loss.h): the chunked cross-entropy against the
// plain one in float64 and float32 (loss and both gradients), in blocks that do not divide the
// rows; a padded vocabulary's ids get no probability in the loss (their embedding rows no
// gradient), in the trainer's batch loss and in sampling.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/config/run_config.h"
#include "engine/commands/sample.h"
#include "engine/train/lm_loss.h"
#include "engine/train/task_data.h"
#include "tests/support.h"

namespace tfw {
namespace test_lm_loss {

namespace fs = std::filesystem;

struct Case {
  torch::Tensor hidden, embedding, targets;
};

// N rows of width d, a vocabulary of V of which the targets use the first `valid`.
Case random_case(std::int64_t N, std::int64_t d, std::int64_t V, std::int64_t valid, torch::ScalarType dtype) {
  torch::manual_seed(3);
  return {torch::randn({N, d}, dtype).requires_grad_(true), (torch::randn({V, d}, dtype) * 0.5).requires_grad_(true),
          torch::randint(valid, {N}, torch::kInt64)};
}

struct Result {
  double loss;
  torch::Tensor grad_hidden, grad_embedding;
};

Result plain(const Case& c, std::int64_t valid) {
  c.hidden.mutable_grad() = torch::Tensor();
  c.embedding.mutable_grad() = torch::Tensor();
  torch::Tensor loss = cross_entropy_plain(c.hidden.matmul(c.embedding.t()), c.targets, valid);
  loss.backward();
  return {loss.item<double>(), c.hidden.grad().clone(), c.embedding.grad().clone()};
}

Result chunked(const Case& c, std::int64_t valid, std::int64_t rows) {
  c.hidden.mutable_grad() = torch::Tensor();
  c.embedding.mutable_grad() = torch::Tensor();
  torch::Tensor loss = cross_entropy_chunked(c.hidden, c.embedding, c.targets, valid, rows, Precision::fp32);
  (loss * 3.0).backward();  // a gradient from above that is not 1: backward scales by it
  return {loss.item<double>(), c.hidden.grad().clone() / 3.0, c.embedding.grad().clone() / 3.0};
}

double largest(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(LmLoss, ChunkedEqualsPlainInFloat64AndFloat32) {
  for (const auto& [dtype, tolerance] : {std::pair{torch::kFloat64, 1e-12}, std::pair{torch::kFloat32, 1e-6}}) {
    SCOPED_TRACE(dtype == torch::kFloat64 ? "float64" : "float32");
    const Case c = random_case(50, 16, 37, 37, dtype);
    const Result reference = plain(c, 37);
    for (std::int64_t rows : {7, 50, 64}) {  // blocks that do not divide N, one block, more than N
      SCOPED_TRACE(rows);
      const Result r = chunked(c, 37, rows);
      EXPECT_NEAR(r.loss, reference.loss, tolerance * reference.loss);
      EXPECT_LT(largest(r.grad_hidden, reference.grad_hidden), tolerance);
      EXPECT_LT(largest(r.grad_embedding, reference.grad_embedding), tolerance);
    }
  }
  // By hand: one row, logits (0, ln 3) against target 0: -log(1 / 4) = ln 4.
  const torch::Tensor h = torch::tensor({{1.0}}, torch::kFloat64);
  const torch::Tensor e = torch::tensor({{0.0}, {std::log(3.0)}}, torch::kFloat64);
  EXPECT_NEAR(cross_entropy_chunked(h, e, torch::tensor({0}, torch::kInt64), 2, 1, Precision::fp32).item<double>(),
              std::log(4.0), 1e-15);
}

// The targets use 30 ids of 37; the other 7 rows of the embedding are large, so that they would
// take most of the probability if they were in the softmax. Left out, they change nothing: the
// loss is the loss over 30 columns, and their rows get no gradient.
TEST(LmLoss, APaddedVocabularysIdsGetNoProbability) {
  const Case c = random_case(40, 8, 37, 30, torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    c.embedding.narrow(0, 30, 7).mul_(40.0);
  }
  const torch::Tensor first30 = c.embedding.narrow(0, 0, 30).detach();
  const double over_30 =
      torch::nn::functional::cross_entropy(c.hidden.detach().matmul(first30.t()), c.targets).item<double>();
  const double over_37 =
      torch::nn::functional::cross_entropy(c.hidden.detach().matmul(c.embedding.detach().t()), c.targets)
          .item<double>();
  ASSERT_GT(over_37, over_30 + 1.0) << "the padded rows should matter when left in";
  const Result p = plain(c, 30), k = chunked(c, 30, 9);
  EXPECT_NEAR(p.loss, over_30, 1e-12);
  EXPECT_NEAR(k.loss, over_30, 1e-12);
  EXPECT_EQ(p.grad_embedding.narrow(0, 30, 7).abs().max().item<double>(), 0.0);
  EXPECT_EQ(k.grad_embedding.narrow(0, 30, 7).abs().max().item<double>(), 0.0);
  EXPECT_LT(largest(k.grad_hidden, p.grad_hidden), 1e-12);
}

// A Tokenformer of vocabulary 320 on byte-level data (256 ids) whose 64 padded embedding rows
// are large: the trainer's loss leaves them out, and in bf16 the chunked loss is the plain
// loss to bf16's rounding.
std::string config_text(std::int64_t vocab) {
  return "family = \"tokenformer\"\n[model]\nlayers = 1\nd = 16\nheads = 2\nn_attn = 8\nn_ffn = 16\nvocab = " +
         std::to_string(vocab) + "\nseq_len = 8\n[data]\ncorpus = \"kjv\"\n[train]\nmax_steps = 1\n";
}

std::shared_ptr<Model> padded_model(RunConfig& config) {
  config = run_config_parse(test::plugins(), toml::parse(config_text(320), std::string("t.toml")), "t.toml");
  std::shared_ptr<Model> model = test::plugins().family("tokenformer").build(*config.model.spec, 7);
  torch::NoGradGuard no_grad;
  auto* lm = dynamic_cast<LanguageModel*>(model.get());
  lm->token_embedding().narrow(0, 256, 64).normal_(0.0, 1.0).mul_(30.0);
  return model;
}

TEST(LmLoss, TheTrainersLossLeavesThePaddedIdsOutAndItsChunkedFormAgreesInBf16) {
  RunConfig config;
  std::shared_ptr<Model> model = padded_model(config);
  auto* lm = dynamic_cast<LanguageModel*>(model.get());
  torch::manual_seed(5);
  const torch::Tensor ids = torch::randint(256, {4, 9}, torch::kInt64);
  const Batch batch{ids.narrow(1, 0, 8), ids.narrow(1, 1, 8)};
  const double left_out = batch_loss(*model, batch, Precision::fp32, 256).item<double>();
  const double left_in = batch_loss(*model, batch, Precision::fp32, 0).item<double>();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = lm->forward(batch.input).narrow(-1, 0, 256);
  EXPECT_NEAR(
      left_out,
      torch::nn::functional::cross_entropy(logits.reshape({-1, 256}), batch.target.reshape({-1})).item<double>(), 1e-6);
  EXPECT_GT(left_in, left_out + 1.0);
  const torch::Tensor hidden = lm->hidden(batch.input).reshape({32, -1});
  const torch::Tensor target = batch.target.reshape({-1});
  const double fp32 =
      cross_entropy_chunked(hidden, lm->token_embedding(), target, 256, 5, Precision::fp32).item<double>();
  const double bf16 =
      cross_entropy_chunked(hidden, lm->token_embedding(), target, 256, 5, Precision::bf16).item<double>();
  EXPECT_NEAR(fp32, left_out, 1e-5);
  EXPECT_NEAR(bf16, left_out, 0.02 * left_out);  // products in bf16: about 3 significant digits
}

// `tfw sample` reads the tokenizer's 256 ids only: greedy decoding of this model would pick
// a padded id (a large row) and the byte tokenizer would refuse it.
TEST(LmLoss, SamplingNeverPicksAPaddedId) {
  RunConfig config;
  std::shared_ptr<Model> model = padded_model(config);
  const std::string dir = "/tmp/tfw-test-sample-padded";
  fs::remove_all(dir);
  CheckpointMeta meta;
  meta.config_toml = run_config_text(config);
  meta.val_loss = meta.best_val_loss = std::nan("");
  meta.step = 1;
  SampleRequest request;
  request.checkpoint = checkpoint_save(dir, *model, nullptr, meta).path;
  request.home = dir;
  request.prompt = "In the beginning";
  request.tokens = 6;
  request.temperature = 0;
  std::string text;
  const SampleStats stats =
      sample_checkpoint(test::plugins(), request, [&](const std::string& piece) { text += piece; });
  EXPECT_EQ(stats.generated, 6);
  EXPECT_EQ(text.size(), 6u);
  fs::remove_all(dir);
}

}  // namespace test_lm_loss
}  // namespace tfw
