// [experiment.eval] end to end: `tfw run` evaluates every run after it trains (each corpus with
// the parameter blocks the file asks, where the run defines them), the results reach the
// store, `tfw export` and comparisons, a second `tfw run` evaluates nothing twice, and an
// impossible blocks mapping is an error before anything trains.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_command.h"

namespace test_experiment_eval {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;
using tfw::test::trainer_val_loss;

const std::string kHome = "/tmp/tfw-test-experiment-eval";
const std::string kTiny = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";

Result tfw(const std::string& arguments) {
  return capture("TFW_FIXED_THREADS=1 " TFW_BINARY " " + arguments + " --home " + kHome);
}

std::string experiment(const std::string& eval_blocks) {
  return R"([experiment]
name = "evals"
[experiment.eval]
corpora = ["kjv", "jargon"]
cloze = 5
blocks = )" +
         eval_blocks + R"(
[runs.plain]
config = ")" +
         kTiny + R"("
train = { max_steps = 20, eval_every = 20, checkpoint_every = 20 }
[runs.masked]
config = ")" +
         kTiny + R"("
train = { max_steps = 20, eval_every = 20, checkpoint_every = 20, mask = { use = ["a"], blocks = { a = { attn = [0, 32], ffn = [0, 128] }, b = { attn = [32, 64], ffn = [128, 256] } } } }
[comparisons.plain-vs-masked]
a = "plain"
b = "masked"
metric = "eval/loss@jargon"
)";
}

std::string sql(const std::string& query) { return capture("sqlite3 " + kHome + "/runs.db \"" + query + "\"").out; }

TEST(ExperimentEval, EvaluatesEveryRunOnceWithItsBlocks) {
  fs::remove_all(kHome);
  fs::create_directories(kHome);
  const std::string file = kHome + "/evals.toml";
  std::ofstream(file) << experiment(R"({ kjv = ["a"], jargon = ["b", "shared"] })");
  const Result run = tfw("run " + file);
  ASSERT_EQ(run.code, 0) << run.output;
  // Each run's last checkpoint, on both corpora: the plain run with every token, the masked
  // one on kjv with its block a (as it trained: the trainer's own loss) and on jargon with b
  // (shared is not one of its blocks, so it is left out).
  for (const auto& [name, kjv_blocks, jargon_blocks] : {std::tuple{"plain", "", ""}, std::tuple{"masked", "a", "b"}}) {
    SCOPED_TRACE(name);
    const std::string where = "run_id = (SELECT id FROM runs WHERE name = '" + std::string(name) + "')";
    EXPECT_EQ(
        sql("SELECT corpus, blocks, step FROM evaluations WHERE metric = 'loss' AND " + where + " ORDER BY corpus"),
        fmt::format("jargon|{}|20\nkjv|{}|20\n", jargon_blocks, kjv_blocks));
    const double kjv =
        std::stod(sql("SELECT value FROM evaluations WHERE metric = 'loss' AND corpus = 'kjv' AND " + where));
    EXPECT_NEAR(kjv, trainer_val_loss(kHome + "/runs/evals/" + name), 1e-6);
    EXPECT_EQ(sql("SELECT COUNT(*) FROM evaluations WHERE metric = 'cloze_accuracy' AND windows = 5 AND " + where),
              "2\n");
  }
  // tfw eval --blocks says which blocks it used, and each layer's tokens in use: block b is
  // attn [32, 64) and ffn [128, 256) of the tiny model's 2 layers (64 attention tokens in
  // q, k, v and o, 256 in ffn).
  const Result with_b = tfw("eval " + kHome + "/runs/evals/masked --corpus kjv --blocks b --no-record");
  ASSERT_EQ(with_b.code, 0) << with_b.output;
  const std::string said =
      "parameter mask: blocks b: tokens in use ffn 256/512, k 64/128, o 64/128, q 64/128, v 64/128";
  EXPECT_NE(with_b.output.find(said), std::string::npos) << with_b.output;
  for (const std::string& line : {fmt::format("  {:<18} {:>7} {:>7} {:>7}\n", "layers.0.q", 32, 32, 64),
                                  fmt::format("  {:<18} {:>7} {:>7} {:>7}\n", "layers.1.o", 32, 32, 64),
                                  fmt::format("  {:<18} {:>7} {:>7} {:>7}\n", "layers.1.ffn", 128, 128, 256)}) {
    EXPECT_NE(with_b.output.find(line), std::string::npos) << line << with_b.output;
  }
  const Result as_json = tfw("eval " + kHome + "/runs/evals/masked --corpus kjv --blocks a,b --no-record --json");
  ASSERT_EQ(as_json.code, 0) << as_json.output;
  const std::string json_text = as_json.output.substr(as_json.output.find("{\n"));
  const nlohmann::json layers = nlohmann::json::parse(json_text)["mask_layers"];
  ASSERT_EQ(layers.size(), 10u);  // q, k, v, o and ffn of 2 layers
  for (const nlohmann::json& layer : layers) EXPECT_EQ(layer["active"], layer["tokens"]) << layer.dump();
  const Result all = tfw("eval " + kHome + "/runs/evals/masked --corpus kjv --blocks all --no-record");
  ASSERT_EQ(all.code, 0) << all.output;
  EXPECT_NE(all.output.find("parameter mask: none (--blocks all: every token in use)"), std::string::npos)
      << all.output;

  // The masked run on jargon with block b differs from the same model with its own block a.
  EXPECT_NE(sql("SELECT value FROM evaluations WHERE metric = 'loss' AND corpus = 'jargon' AND blocks = 'b'"),
            sql("SELECT value FROM evaluations WHERE metric = 'loss' AND corpus = 'jargon' AND blocks = ''"));

  // Exports: the evaluations table, and a comparison on an evaluation.
  const Result table = tfw("export " + file + " --table evaluations --format csv");
  ASSERT_EQ(table.code, 0) << table.output;
  EXPECT_NE(table.output.find("masked,jargon,b,loss,1,"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("plain,kjv,all,cloze_accuracy,1,"), std::string::npos) << table.output;
  const Result compared = tfw("export " + file + " --table comparisons");
  ASSERT_EQ(compared.code, 0) << compared.output;
  EXPECT_NE(compared.output.find("final eval/loss@jargon"), std::string::npos) << compared.output;

  // Again: nothing left to train or evaluate.
  const std::string rows = sql("SELECT COUNT(*) FROM evaluations");
  const Result again = tfw("run " + file);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("plain: finished before, skipped"), std::string::npos) << again.output;
  EXPECT_EQ(sql("SELECT COUNT(*) FROM evaluations"), rows);
  // A corpus added later is evaluated for the finished runs, without training them again.
  std::string more = experiment(R"({ kjv = ["a"], jargon = ["b", "shared"] })");
  const std::string corpora = R"(["kjv", "jargon"])";
  more.replace(more.find(corpora), corpora.size(), R"(["kjv", "jargon", "fortunes"])");
  std::ofstream(file) << more;
  const Result added = tfw("run " + file);
  ASSERT_EQ(added.code, 0) << added.output;
  EXPECT_NE(added.output.find("masked: finished before; evaluating it ([experiment.eval])"), std::string::npos)
      << added.output;
  EXPECT_EQ(sql("SELECT COUNT(*) FROM evaluations WHERE corpus = 'fortunes' AND metric = 'loss'"), "2\n");
  EXPECT_EQ(sql("SELECT COUNT(*) FROM runs WHERE status = 'finished'"), "2\n");

  // Blocks none of which a run defines: an error before anything trains.
  std::ofstream(kHome + "/bad.toml") << experiment(R"({ kjv = ["zzz"] })");
  const Result bad = tfw("run " + kHome + "/bad.toml --dry-run");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("experiment.eval.blocks evaluates kjv with blocks zzz, none of which run masked defines"),
            std::string::npos)
      << bad.output;
}

}  // namespace test_experiment_eval
