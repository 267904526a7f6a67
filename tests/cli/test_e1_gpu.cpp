// E1 at GPU scale (experiments/gpu/e1-bpe.toml, docs/results/e1-gpu.md), checked on a CPU:
// the GPU file plans here, with its units, its sizes and its matched budget; its CPU twin's
// units, run in separate homes and exported as bundles, merge into one report that decides no
// claim before its three seeds, and decides the claims whose seeds have all run.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_command.h"

namespace test_e1_gpu {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

const std::string kTfw = TFW_BINARY;
const std::string kSource = TFW_SOURCE_DIR;
const std::string kGpuFile = kSource + "/experiments/gpu/e1-bpe.toml";
const std::string kTwin = kSource + "/experiments/gpu/e1-bpe-twin.toml";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::map<std::string, nlohmann::json> by_name(const nlohmann::json& list) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& item : list) out[item["name"].get<std::string>()] = item;
  return out;
}

class E1Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fmt::format("/tmp/tfw-test-e1-gpu-{}-{}", getpid(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

// The plan on a machine without the file's GPU: every run and unit listed, the one problem
// the missing device (none where there is a GPU), the ladder 4x in Pattention parameters with
// at least 20M non-embedding parameters at the top, and the matched run on the ladder's
// cumulative FLOPs within one of its steps.
TEST_F(E1Gpu, TheGpuFilePlansHereWithItsUnitsSizesAndMatchedBudget) {
  // The corpus's name, prepared from two small Python files (the real one is PyTorch's).
  fs::create_directories(root_ + "/src/pytorch-py");
  fs::copy_file(kSource + "/scripts/fit_erfc.py", root_ + "/src/pytorch-py/a.py");
  fs::copy_file(kSource + "/tests/results/tracking_readback.py", root_ + "/src/pytorch-py/b.py");
  Result prepared =
      capture(fmt::format("{} data prepare {}/src/pytorch-py --tokenizer gpt2 --home {}/h", kTfw, root_, root_));
  ASSERT_EQ(prepared.code, 0) << prepared.output;
  Result plan = capture(fmt::format("{} run {} --dry-run --json --home {}/h", kTfw, kGpuFile, root_));
  ASSERT_TRUE(plan.code == 0 || plan.code == 2) << plan.output;
  const nlohmann::json p = nlohmann::json::parse(plan.out);
  if (plan.code == 2) {  // this machine has no CUDA device: that, and nothing else
    ASSERT_EQ(p["problems"].size(), 1u) << p["problems"];
    EXPECT_NE(p["problems"][0].get<std::string>().find("36 runs"), std::string::npos) << p["problems"][0];
    EXPECT_NE(p["problems"][0].get<std::string>().find("asks for CUDA"), std::string::npos) << p["problems"][0];
  }
  EXPECT_EQ(p["experiment"], "e1-gpu");
  ASSERT_EQ(p["runs"].size(), 36u);
  const auto runs = by_name(p["runs"]);
  for (const auto& [name, run] : runs) {
    EXPECT_EQ(run["device"], "cuda") << name;
    EXPECT_EQ(run["corpus"], "pytorch-py") << name;
    EXPECT_TRUE(run["estimated_seconds"].is_null()) << name << ": no run has measured a GPU pace in this home";
  }
  // Non-embedding parameters: all but the 50,304 x 512 tied embedding.
  auto non_embedding = [&](const std::string& name) {
    return runs.at(name)["parameters"].get<double>() - 50304.0 * 512;
  };
  const double s1 = non_embedding("tokenformer-s1-s0"), s3 = non_embedding("tokenformer-s3-s0");
  EXPECT_GE(s3, 20e6);
  // 4 layers x (8 n_attn d + 2 n_ffn d): 8,388,608 -> 33,554,432 Pattention parameters, plus
  // the same norms on both.
  const double norms = s1 - 8388608.0;
  EXPECT_GT(norms, 0);
  EXPECT_LT(norms, 20000);
  EXPECT_DOUBLE_EQ(s3 - norms, 4 * (s1 - norms));
  // The Transformers of each grown size have the Tokenformer's non-embedding parameters.
  EXPECT_NEAR(non_embedding("transformer-s3-full-s0"), s3, 0.01 * s3);
  EXPECT_NEAR(non_embedding("transformer-s2-full-s0"), non_embedding("tokenformer-s2-full-s0"), 0.01 * s3);
  // The matched run: the ladder's cumulative FLOPs, to within one of its own steps.
  const nlohmann::json& matched = runs.at("tokenformer-s3-matched-s0");
  const double step = matched["training_flops"].get<double>() / matched["steps"].get<double>();
  EXPECT_LE(std::abs(matched["training_flops"].get<double>() -
                     runs.at("tokenformer-s3-s0")["cumulative_flops"].get<double>()),
            step);
  // Nine units, seed by seed: the ladder whole, the Tokenformer controls, the Transformers.
  ASSERT_EQ(p["units"].size(), 9u);
  EXPECT_EQ(p["units"][0]["name"], "ladder-s0");
  EXPECT_EQ(p["units"][1]["name"], "tokenformer-controls-s0");
  EXPECT_EQ(p["units"][2]["name"], "transformer-controls-s0");
  EXPECT_EQ(p["units"][8]["name"], "transformer-controls-s2");
  EXPECT_EQ(p["units"][0]["runs"], nlohmann::json({"tokenformer-s1-s0", "tokenformer-s2-s0", "tokenformer-s3-s0"}));
  EXPECT_EQ(p["units"][1]["runs"].size(), 5u);
  EXPECT_EQ(p["units"][2]["runs"].size(), 4u);
}

// The twin's matched run sits on the twin ladder's cumulative FLOPs too.
TEST_F(E1Gpu, TheTwinHasTheSameRunsUnitsAndClaimsAndItsOwnMatchedBudget) {
  Result twin = capture(fmt::format("{} run {} --dry-run --json --home {}/h", kTfw, kTwin, root_));
  Result gpu = capture(fmt::format("{} run {} --dry-run --json --home {}/h", kTfw, kGpuFile, root_));
  ASSERT_EQ(twin.code, 0) << twin.output;
  const nlohmann::json t = nlohmann::json::parse(twin.out), g = nlohmann::json::parse(gpu.out);
  ASSERT_EQ(t["runs"].size(), g["runs"].size());
  for (std::size_t i = 0; i < t["runs"].size(); ++i) {
    EXPECT_EQ(t["runs"][i]["name"], g["runs"][i]["name"]);
    EXPECT_EQ(t["runs"][i]["parent"], g["runs"][i]["parent"]);
    EXPECT_EQ(t["runs"][i]["family"], g["runs"][i]["family"]);
  }
  EXPECT_EQ(t["units"].size(), g["units"].size());
  const auto runs = by_name(t["runs"]);
  const nlohmann::json& matched = runs.at("tokenformer-s3-matched-s1");
  const double step = matched["training_flops"].get<double>() / matched["steps"].get<double>();
  EXPECT_LE(std::abs(matched["training_flops"].get<double>() -
                     runs.at("tokenformer-s3-s1")["cumulative_flops"].get<double>()),
            step);
}

// Two units in two homes, as two separate GPU machines would run them; their bundles merge in
// one report, also when units ran out of order; a third home that imports the bundles and runs
// the rest of the Tokenformer units decides the Tokenformer claims and leaves the Transformer
// ones undecided.
TEST_F(E1Gpu, TwinUnitsMergeAndNoClaimIsDecidedBeforeItsThreeSeeds) {
  auto unit = [&](const std::string& name, const std::string& home) {
    Result ran = capture(fmt::format("{} run {} --unit {} --home {}", kTfw, kTwin, name, home));
    ASSERT_EQ(ran.code, 0) << ran.output;
    Result plan = capture(fmt::format("{} run {} --dry-run --json --home {}", kTfw, kTwin, home));
    ASSERT_EQ(plan.code, 0) << plan.output;
    std::string runs;
    const nlohmann::json parsed = nlohmann::json::parse(plan.out);
    for (const auto& u : parsed["units"]) {
      if (u["name"] != name) continue;
      EXPECT_TRUE(u["finished"].get<bool>()) << name;
      for (const auto& r : u["runs"]) runs += " " + r.get<std::string>();
    }
    Result exported =
        capture(fmt::format("{} runs export{} --out {}/{}.tfwb --home {}", kTfw, runs, root_, name, home));
    ASSERT_EQ(exported.code, 0) << exported.output;
  };
  unit("ladder-s0", root_ + "/a");
  unit("tokenformer-controls-s0", root_ + "/b");
  Result report =
      capture(fmt::format("{} report {} --bundle {}/ladder-s0.tfwb --bundle {}/tokenformer-controls-s0.tfwb "
                          "--out {}/r",
                          kTfw, kTwin, root_, root_, root_));
  ASSERT_EQ(report.code, 0) << report.output;
  const std::string text = read(root_ + "/r/e1-gpu-twin.md");
  EXPECT_NE(text.find("- **Runs:** 8 finished of 36 planned"), std::string::npos) << text.substr(0, 2000);
  EXPECT_NE(text.find("**Measured:** 2 of 9 (ladder-s0, tokenformer-controls-s0). **Still to run:** 7"),
            std::string::npos)
      << text.substr(0, 3000);
  // One seed pair of the ladder and its control: no verdict yet, and why.
  EXPECT_NE(text.find("- **Verdict: not yet decided** (1 of 3 seeds; so far inconclusive"), std::string::npos) << text;
  // The Transformers have not run: 0 of 3, not an error.
  EXPECT_NE(text.find("- **Verdict: not yet decided** (0 of 3 seeds: transformer-s3-full has not finished a run yet"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("**Verdict: supported**"), std::string::npos);
  EXPECT_EQ(text.find("**Verdict: not supported**"), std::string::npos);

  // Units run out of order: the ladder of seed 1 beside the controls of seed 0. Both sides
  // have finished runs, but no seed on both: still not decided, and said why.
  unit("ladder-s1", root_ + "/a");
  Result disjoint =
      capture(fmt::format("{} report {} --bundle {}/ladder-s1.tfwb --bundle "
                          "{}/tokenformer-controls-s0.tfwb --out {}/r2",
                          kTfw, kTwin, root_, root_, root_));
  ASSERT_EQ(disjoint.code, 0) << disjoint.output;
  EXPECT_NE(read(root_ + "/r2/e1-gpu-twin.md")
                .find("- **Verdict: not yet decided** (0 of 3 seeds: no seed has finished on both sides yet"),
            std::string::npos)
      << read(root_ + "/r2/e1-gpu-twin.md");

  // A third home: both bundles, then the other two seeds of the Tokenformer units.
  const std::string home = root_ + "/c";
  for (const char* b : {"ladder-s0", "ladder-s1", "tokenformer-controls-s0"}) {
    Result imported = capture(fmt::format("{} runs import {}/{}.tfwb --home {}", kTfw, root_, b, home));
    ASSERT_EQ(imported.code, 0) << imported.output;
  }
  Result rest = capture(fmt::format("{} run {} --only 'tokenformer-*' --jobs 2 --home {}", kTfw, kTwin, home));
  ASSERT_EQ(rest.code, 0) << rest.output;
  // Seed 0's 8 runs and seed 1's ladder came in the bundles: 11 skipped, the other 13 trained.
  std::size_t skipped = 0;
  for (std::size_t at = rest.err.find("finished before, skipped"); at != std::string::npos;
       at = rest.err.find("finished before, skipped", at + 1)) {
    skipped += 1;
  }
  EXPECT_EQ(skipped, 11u) << rest.err;
  Result decided = capture(fmt::format("{} report {} --out {}/r3 --home {}", kTfw, kTwin, root_, home));
  ASSERT_EQ(decided.code, 0) << decided.output;
  const std::string full = read(root_ + "/r3/e1-gpu-twin.md");
  EXPECT_NE(full.find("**Measured:** 6 of 9"), std::string::npos) << full.substr(0, 3000);
  // Each Tokenformer claim has its 3 pairs and a verdict of the rule; the Transformer ones none.
  std::size_t decided_claims = 0, undecided = 0;
  for (std::size_t at = full.find("- **Verdict: "); at != std::string::npos; at = full.find("- **Verdict: ", at + 1)) {
    const std::string verdict = full.substr(at + 13, full.find("**", at + 13) - at - 13);
    (verdict == "not yet decided" ? undecided : decided_claims) += 1;
    EXPECT_TRUE(verdict == "supported" || verdict == "not supported" || verdict == "inconclusive" ||
                verdict == "not yet decided")
        << verdict;
  }
  EXPECT_EQ(decided_claims, 4u) << full;  // the four Tokenformer-against-Tokenformer claims
  EXPECT_EQ(undecided, 3u) << full;       // the three against the Transformer
  EXPECT_NE(full.find("3 seed pairs (comparison `grown-vs-matched-schedule`)"), std::string::npos) << full;

  // The figure: one colour a lineage. The ladder's three stages share one, and each control
  // (from scratch: a lineage of its own) has its own look: a colour of the palette, dashed in
  // its second round (every planned group holds its colour, drawn or not yet). Read from the
  // legend: a line in the series' colour, then its label's first line (a long label wraps).
  const std::string svg = read(root_ + "/r3/figures/e1-gpu-twin/loss_vs_flops.svg");
  std::map<std::string, std::string> colour_of;  // group -> its legend colour and dash
  const std::regex entry("stroke=\"(#[0-9a-f]{6})\" stroke-width=\"2.5\"([^>]*)/>\n<text [^>]*>([a-z0-9-]+) \\(");
  for (std::sregex_iterator it(svg.begin(), svg.end(), entry), end; it != end; ++it) {
    const bool dashed = (*it)[2].str().find("stroke-dasharray") != std::string::npos;
    colour_of[(*it)[3]] = (*it)[1].str() + (dashed ? " dashed" : "");
  }
  ASSERT_EQ(colour_of.size(), 8u) << svg.substr(0, 4000);  // the ladder's 3 stages and 5 controls
  EXPECT_EQ(colour_of["tokenformer-s1"], colour_of["tokenformer-s2"]);
  EXPECT_EQ(colour_of["tokenformer-s2"], colour_of["tokenformer-s3"]);
  std::set<std::string> distinct;
  for (const auto& [group, colour] : colour_of) distinct.insert(colour);
  EXPECT_EQ(distinct.size(), 6u);  // one for the ladder, five for the controls
}

}  // namespace test_e1_gpu
