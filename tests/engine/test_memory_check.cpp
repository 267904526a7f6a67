// The memory check's estimate against hand-computed values for the paper's 124M Transformer
// (what CUDA's fused attention and the chunked loss keep, against the CPU's operator and the
// plain loss); train.grad_accum = "auto" choosing the fewest micro-batches that fit (a 124M
// model on an 80 GB GPU takes at least 32 × 1024 a micro-batch); and, through the real binary
// on the smallest run config, an auto split trains the same numbers as that split given by
// hand, and a resumed run keeps it whatever memory it finds; the estimate counts validation's
// full logits, and a run that grows chooses a split its grown model fits.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/config/run_config.h"
#include "engine/config/schedule.h"
#include "engine/core/error.h"
#include "engine/machine/memory_check.h"
#include "tests/cli/run_command.h"
#include "tests/engine/trainer_test_support.h"
#include "tests/scratch.h"
#include "tests/support.h"

namespace test_memory_check {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

const std::string kPaper = std::string(TFW_SOURCE_DIR) + "/experiments/paper/";
const std::string kTiny = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";

// A paper model with a [train] section of its own; on "cuda" as a GPU machine would read it
// (the config is read for the CPU, where this machine has no CUDA device to check it against).
tfw::RunConfig paper_config(const std::string& file, bool cuda, std::vector<std::string> overrides = {}) {
  overrides.push_back("train.max_steps=10");
  tfw::RunConfig config = tfw::run_config_load(tfw::test::plugins(), kPaper + file, overrides);
  if (cuda) config.train.device = *tfw::device_name_parse("cuda");
  return config;
}

double estimate(const tfw::RunConfig& config, std::int64_t micro_batch) {
  return tfw::train_memory_bytes(config, tfw::train_plan(config), micro_batch);
}

// The 124M Transformer (123,606,528 parameters; N = 84,934,656 that a token multiplies by, so
// N / (L·d) = 9,216; L = 12, d = 768, 12 heads, V = 50,304, T = 1,024), by hand:
//   16 bytes a parameter:                         1,977,704,448
//   a token's floats: 12 × (9,216 + 16·768 + attention) + logits
//   CUDA, 32 × 1,024 (chunked loss: 32,768 rows × V × 4 B > 256 MiB):
//     12 × (9,216 + 12,288 + 2·12) + 2·768 = 259,872 floats; × 4 B × 32,768 tokens = 34,061,942,784
//     one block of logits: 3 × 2,048 × 50,304 × 4 B = 1,236,271,104;   in all 37,275,918,336
//   CPU, the same batch: attention 2·12·1,024 = 24,576 instead of 24:   in all 75,892,875,264
//   CUDA, 1 × 1,024 (1,024 rows: the plain loss, 2·V floats a token):
//     12 × 21,528 + 2·50,304 = 358,944 floats × 4 B × 1,024 + 1,977,704,448 = 3,447,939,072
TEST(MemoryCheck, OnAGpuTheFusedAttentionAndTheChunkedLossKeepNeitherTSquaredNorTheLogits) {
  const tfw::RunConfig gpu = paper_config("transformer-scaling-124m.toml", true);
  const tfw::RunConfig cpu = paper_config("transformer-scaling-124m.toml", false);
  EXPECT_EQ(gpu.model.spec->parameter_count(), 123606528);
  EXPECT_DOUBLE_EQ(estimate(gpu, 32), 37275918336.0);
  EXPECT_DOUBLE_EQ(estimate(cpu, 32), 75892875264.0);
  EXPECT_DOUBLE_EQ(estimate(gpu, 1), 3447939072.0);
  // The configured batch (16) is what the two-argument form counts.
  EXPECT_DOUBLE_EQ(tfw::train_memory_bytes(gpu, tfw::train_plan(gpu)), estimate(gpu, 16));
}

// A small width over a large vocabulary: validation's full logits (12 bytes a token and
// vocabulary entry, beside 18 a parameter) need more than training with the chunked loss,
// and the estimate is theirs. 128 × 1,024 tokens × 50,304 × 12 B = 79,121,350,656 B
// (training's: 16,810,319,872 B).
TEST(MemoryCheck, ALargeVocabularyOverASmallWidthCountsValidationsFullLogits) {
  const tfw::RunConfig narrow = paper_config("transformer-scaling-124m.toml", true,
                                             {"model.d=256", "model.layers=4", "model.heads=4", "model.d_ffn=1024"});
  const double parameters = static_cast<double>(narrow.model.spec->parameter_count());
  EXPECT_DOUBLE_EQ(estimate(narrow, 128), 18 * parameters + 79121350656.0);
  // At 124M the activations still count most: the hand-computed values of the test above.
  EXPECT_DOUBLE_EQ(estimate(paper_config("transformer-scaling-124m.toml", true), 32), 37275918336.0);
}

TEST(MemoryCheck, AutoSplitsTheStepsBatchIntoTheFewestMicroBatchesThatFit) {
  for (const char* file : {"transformer-scaling-124m.toml", "tokenformer-scaling-124m.toml"}) {
    SCOPED_TRACE(file);
    const tfw::RunConfig config =
        paper_config(file, true, {"train.batch_size=512", "train.grad_accum=\"auto\"", "train.precision=\"bf16\""});
    ASSERT_TRUE(config.train.grad_accum_auto);
    EXPECT_EQ(config.train.grad_accum, 1);
    const tfw::TrainPlan plan = tfw::train_plan(config);
    EXPECT_EQ(plan.examples_per_step, 512);  // the step's batch, whatever the split
    // 80 GB: 64 sequences need about 71.3 GB (within 90% of 80 GB); 79 GB free, as an 80 GB
    // card has after its CUDA context: 71.1 GB of room, so 32 (37.3 GB). At least 32 × 1024.
    const tfw::MicroBatch on80 = tfw::micro_batch_choose(config, plan, 80e9, "80 GB");
    EXPECT_EQ(on80.size * on80.accum, 512);
    EXPECT_GE(on80.size, 32);
    EXPECT_LE(on80.need_bytes, 0.9 * 80e9);
    const tfw::MicroBatch on79 = tfw::micro_batch_choose(config, plan, 79e9, "79 GB");
    EXPECT_GE(on79.size, 32);
    // The fewest: twice the micro-batch would not fit.
    EXPECT_GT(estimate(config, 2 * on79.size), 0.9 * 79e9);
    EXPECT_DOUBLE_EQ(on79.need_bytes, estimate(config, on79.size));
    // A 141 GB H200 (about 140 GB free) takes more at a time; nothing known takes it whole.
    EXPECT_GT(tfw::micro_batch_choose(config, plan, 140e9, "140 GB").size, on79.size);
    EXPECT_EQ(tfw::micro_batch_choose(config, plan, 0, "unknown").size, 512);
  }
  const tfw::RunConfig transformer =
      paper_config("transformer-scaling-124m.toml", true, {"train.batch_size=512", "train.grad_accum=\"auto\""});
  const tfw::TrainPlan plan = tfw::train_plan(transformer);
  EXPECT_EQ(tfw::micro_batch_choose(transformer, plan, 80e9, "").size, 64);
  EXPECT_EQ(tfw::micro_batch_choose(transformer, plan, 79e9, "").size, 32);
  // A batch whose divisors skip the size that would fit: 48 = 16 × 3 (16 fit, 24 would not).
  const tfw::RunConfig odd =
      paper_config("transformer-scaling-124m.toml", true, {"train.batch_size=48", "train.grad_accum=\"auto\""});
  const double room_for_20 = estimate(odd, 20) / 0.9;
  const tfw::MicroBatch split = tfw::micro_batch_choose(odd, tfw::train_plan(odd), room_for_20, "");
  EXPECT_EQ(split.size, 16);
  EXPECT_EQ(split.accum, 3);
  // Two ranks: each micro-batch a multiple of 2 (a micro-batch of 1 would fit, 2 does not).
  const double room_for_1 = estimate(odd, 1) / 0.9 + 1;
  EXPECT_THROW(tfw::micro_batch_choose(odd, tfw::train_plan(odd), room_for_1, "", 2), tfw::UsageError);
  EXPECT_EQ(tfw::micro_batch_choose(odd, tfw::train_plan(odd), room_for_1, "").size, 1);
  // Nothing fits: the smallest split's estimate and the memory there is, named.
  const std::string refused = tfw::test::usage_error(
      [&] { tfw::micro_batch_choose(transformer, plan, 3e9, "GPU cuda:0 has 3 GB free of 80 GB"); });
  EXPECT_NE(refused.find("about 3.45 GB"), std::string::npos) << refused;
  EXPECT_NE(refused.find("smallest micro-batch (1 x 1024 tokens, 512 of them a step"), std::string::npos) << refused;
  EXPECT_NE(refused.find("GPU cuda:0 has 3 GB free of 80 GB"), std::string::npos) << refused;
}

TEST(MemoryCheck, AutoAndTheLimitAreReadWrittenBackAndCheckedInTheConfig) {
  const tfw::RunConfig config =
      paper_config("transformer-scaling-124m.toml", false, {"train.grad_accum=\"auto\"", "train.memory_limit_gb=2.5"});
  EXPECT_TRUE(config.train.grad_accum_auto);
  EXPECT_DOUBLE_EQ(config.train.memory_limit_gb, 2.5);
  const std::string text = tfw::run_config_text(config);
  EXPECT_NE(text.find("grad_accum = 'auto'"), std::string::npos) << text;
  EXPECT_NE(text.find("memory_limit_gb = 2.5"), std::string::npos) << text;
  // The limit is the memory there is, and says so.
  const tfw::MemoryAvailable there = tfw::train_memory_available(config);
  EXPECT_DOUBLE_EQ(there.bytes, 2.5e9);
  EXPECT_NE(there.where.find("train.memory_limit_gb allows 2.5 GB"), std::string::npos) << there.where;
  // A config without the keys writes neither (stored configs from before them stay the same).
  const std::string plain = tfw::run_config_text(paper_config("transformer-scaling-124m.toml", false));
  EXPECT_NE(plain.find("grad_accum = 1"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("memory_limit_gb"), std::string::npos) << plain;
  // Anything else than a number or "auto" is refused, naming the key and both forms.
  const std::string misspelled =
      tfw::test::usage_error([] { paper_config("transformer-scaling-124m.toml", false, {"train.grad_accum=\"4\""}); });
  EXPECT_NE(misspelled.find("grad_accum"), std::string::npos) << misspelled;
  EXPECT_NE(misspelled.find("a whole number of micro-batches or \"auto\", got \"4\""), std::string::npos) << misspelled;
  for (const char* limit : {"-1", "nan", "inf", "2e6"}) {
    const std::string bad = tfw::test::usage_error(
        [&] { paper_config("transformer-scaling-124m.toml", false, {std::string("train.memory_limit_gb=") + limit}); });
    EXPECT_NE(bad.find("memory_limit_gb"), std::string::npos) << limit << ": " << bad;
  }
  // A training that cannot fit even split the smallest way is refused before any compute.
  const std::string refused = tfw::test::usage_error([] {
    const tfw::RunConfig tight =
        paper_config("transformer-scaling-124m.toml", false, {"train.grad_accum=\"auto\"", "train.memory_limit_gb=1"});
    tfw::train_memory_check(tight, tfw::train_plan(tight));
  });
  EXPECT_NE(refused.find("train.memory_limit_gb allows 1 GB"), std::string::npos) << refused;
}

// Every train/ and val/ point of a run folder's metrics.jsonl, by key and step.
std::map<std::pair<std::string, std::int64_t>, double> losses(const std::string& run_dir) {
  std::map<std::pair<std::string, std::int64_t>, double> points;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json point = nlohmann::json::parse(line);
    const std::string key = point["key"];
    if (key == "train/loss" || key == "val/loss") points[{key, point["step"].get<std::int64_t>()}] = point["value"];
  }
  return points;
}

// The tiny Tokenformer, 8 sequences a step, with room for a micro-batch of 4 and not of 8:
// auto trains 2 micro-batches of 4, the same numbers bit for bit as grad_accum = 2 given by
// hand (with eval_batches doubled, the same validation windows); resumed with room for the
// whole batch, it keeps its 4.
TEST(MemoryCheck, AnAutoSplitTrainsTheNumbersOfTheSameSplitGivenByHandAndAResumeKeepsIt) {
  const std::string home = tfw::test::fresh_dir("micro-batch").string();
  const tfw::RunConfig tiny = tfw::run_config_load(tfw::test::plugins(), kTiny, {"train.max_steps=4"});
  const double room = (estimate(tiny, 4) + estimate(tiny, 8)) / 2 / 0.9;
  ASSERT_LT(estimate(tiny, 4), 0.9 * room);
  const std::string common =
      " --set train.max_steps=4 --set train.eval_every=2 --set train.eval_batches=2 "
      "--set train.checkpoint_every=2 --set train.log_every=1";
  Result automatic =
      capture(fmt::format("{} --threads 1 train {} --home {} --name auto --json{} --set "
                          "train.batch_size=8 --set train.grad_accum=auto --set "
                          "train.memory_limit_gb={:.12g}",
                          TFW_BINARY, kTiny, home, common, room / 1e9));
  ASSERT_EQ(automatic.code, 0) << automatic.output;
  const nlohmann::json summary = nlohmann::json::parse(automatic.out);
  EXPECT_EQ(summary["micro_batch"], 4);
  EXPECT_EQ(summary["grad_accum"], 2);
  EXPECT_EQ(summary["examples"], 32);  // 4 steps of 8
  EXPECT_DOUBLE_EQ(summary["memory"]["estimate_bytes"].get<double>(), estimate(tiny, 4));
  EXPECT_NE(automatic.err.find("train.grad_accum = auto: 8 sequences a step as 2 micro-batches of 4"),
            std::string::npos)
      << automatic.err;
  Result by_hand =
      capture(fmt::format("{} --threads 1 train {} --home {} --name hand --json{} --set "
                          "train.batch_size=4 --set train.grad_accum=2 --set train.eval_batches=4",
                          TFW_BINARY, kTiny, home, common));
  ASSERT_EQ(by_hand.code, 0) << by_hand.output;
  const auto auto_losses = losses(home + "/runs/auto"), hand_losses = losses(home + "/runs/hand");
  EXPECT_EQ(auto_losses.count({"train/loss", 4}), 1u);
  EXPECT_EQ(auto_losses.count({"val/loss", 2}), 1u);
  EXPECT_EQ(auto_losses.count({"val/loss", 4}), 1u);
  EXPECT_EQ(auto_losses, hand_losses);
  // The stored config is the one given: "auto", 8 a step.
  const std::string stored =
      capture("sqlite3 " + home + "/runs.db \"SELECT config FROM runs WHERE name = 'auto'\"").out;
  EXPECT_NE(stored.find("grad_accum = 'auto'"), std::string::npos) << stored;
  EXPECT_NE(stored.find("batch_size = 8"), std::string::npos) << stored;
  // tfw eval reads the trainer's windows (8 a step × 2 batches), a micro-batch at a time: the
  // trainer's validation loss.
  Result evaluated = capture(fmt::format("{} --threads 1 eval auto --home {} --json", TFW_BINARY, home));
  ASSERT_EQ(evaluated.code, 0) << evaluated.output;
  const nlohmann::json report = nlohmann::json::parse(evaluated.out)["results"][0];
  EXPECT_EQ(report["windows"], 16);
  EXPECT_NEAR(report["loss"].get<double>(), tfw::test::trainer_val_loss(home + "/runs/auto"), 1e-6);
  // A number in place of "auto" on resume would make the step 2 × 8 sequences: refused, with the fix.
  Result switched =
      capture(fmt::format("{} train --resume auto --home {} --extend keep --set train.max_steps=6 "
                          "--set train.grad_accum=2",
                          TFW_BINARY, home));
  EXPECT_EQ(switched.code, 2) << switched.output;
  EXPECT_NE(switched.err.find("the run's steps would go from 8 to 16 sequences"), std::string::npos) << switched.err;
  EXPECT_NE(switched.err.find("8 / N with train.grad_accum = N"), std::string::npos) << switched.err;
  // Resumed to 6 steps with room for the whole batch: the split stays 2 × 4.
  Result resumed =
      capture(fmt::format("{} --threads 1 train --resume auto --home {} --json --extend keep --set "
                          "train.max_steps=6 --set train.memory_limit_gb=100",
                          TFW_BINARY, home));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(nlohmann::json::parse(resumed.out)["micro_batch"], 4);
  EXPECT_NE(resumed.err.find("as 2 micro-batches of 4 (kept from its checkpoint)"), std::string::npos) << resumed.err;
  fs::remove_all(home);
}

// The messages a training says.
class Messages : public tfw::RunObserver {
 public:
  void message(const std::string& line) override { lines += line + "\n"; }
  std::string lines;
};

// A run that grows at step 2 to far more parameter tokens: "auto" chooses a split the grown
// model fits too, and says so; the model it starts with alone would take the whole batch.
TEST(MemoryCheck, AutoChoosesASplitThatTheModelOfEachGrowthFitsToo) {
  using namespace tfw::trainer_test;
  const std::string growing = kTokenformer + R"(
[[train.growth]]
at_step = 2
method = "pattention_grow"
to = { n_attn = 512, n_ffn = 1024 }
)";
  const std::vector<std::string> train = {"train.max_steps=3", "train.checkpoint_every=1000", "train.eval_every=1000",
                                          "train.grad_accum=\"auto\""};
  tfw::RunConfig config = config_of(growing, train);
  const tfw::RunConfig grown = config_of(kTokenformer, {"model.n_attn=512", "model.n_ffn=1024", "train.max_steps=3"});
  const double small_whole = estimate(config, 8), grown_half = estimate(grown, 4), grown_whole = estimate(grown, 8);
  ASSERT_LT(std::max(small_whole, grown_half), grown_whole);
  const double room = (std::max(small_whole, grown_half) + grown_whole) / 2 / tfw::kAutoMemoryShare;
  config.train.memory_limit_gb = room / 1e9;
  EXPECT_EQ(tfw::micro_batch_choose(config, tfw::train_plan(config), room, "").size, 8);
  tfw::TrainOptions options = options_for("auto-split-growth");
  Messages said;
  options.observer = &said;
  const tfw::TrainSummary summary = tfw::train_run(tfw::test::plugins(), config, options);
  EXPECT_EQ(summary.steps, 3);
  EXPECT_EQ(summary.micro_batch, 4);
  EXPECT_EQ(summary.grad_accum, 2);
  EXPECT_EQ(summary.growth_events, 1);
  EXPECT_NE(said.lines.find("8 sequences a step as 2 micro-batches of 4"), std::string::npos) << said.lines;
  EXPECT_NE(said.lines.find("for the model of its growth at step 2"), std::string::npos) << said.lines;
}

}  // namespace test_memory_check
