// The schedule designer's model (workbench/gui/designer.h): the experiment file it writes
// merges each stage's model changes over the earlier ones; its predictions are the engine's
// plan (every stage's FLOPs = its tokens × the training FLOPs per token of its model, the
// cumulative budget adds the ancestors), they match `tfw run --dry-run` of the saved file,
// and a bad design gets the engine's message.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/plugin/registry.h"
#include "tests/plugin_registry.h"
#include "engine/config/run_config.h"
#include "tests/cli/run_command.h"
#include "workbench/gui/designer.h"
#include "workbench/gui/service_link.h"
#include "workbench/service/job_capabilities.h"

namespace tfw::gui {
namespace {

namespace fs = std::filesystem;

using test::test_plugins;

const std::string kBase = TFW_SOURCE_DIR "/experiments/mini/quickstart-tokenformer.toml";

Design three_stages() {
  Design design;
  design.name = "test-design";
  design.base_config = kBase;
  design.stages = {{"", "", "", 2e5},
                   {"pattention_grow", "n_attn = 256, n_ffn = 1024", "key_init = \"zero\"", 1e5},
                   {"pattention_grow", "n_attn = 512", "", 1e5}};
  return design;
}

TEST(Designer, LaterStagesChangeTheModelOnTopOfEarlierOnes) {
  const std::string text = design_to_toml(three_stages(), "", true);
  EXPECT_NE(
      text.find(
          "[runs.stage3]\nconfig = \"" + kBase +
          "\"\nparent = \"stage2\"\n"
          "growth = { method = \"pattention_grow\", options = {  } }\n"
          "model = { n_attn = 512, n_ffn = 1024 }\ntrain = { max_tokens = 100000, max_steps = 0, max_flops = 0 }\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("[runs.scratch]"), std::string::npos);
  EXPECT_EQ(design_to_toml(three_stages(), "", false).find("[runs.scratch]"), std::string::npos);
}

// A vision Tokenformer grows in the designer as a language Tokenformer does: its plan counts
// images and their patch tokens, and FLOPs per image.
TEST(Designer, AVisionTokenformerScheduleIsPlanned) {
  const std::string base = "/tmp/tfw-test-designer-vision.toml";
  std::ofstream(base) << "family = \"vision_tokenformer\"\n[model]\nlayers = 2\nd = 32\nheads = 4\nn_attn = 16\n"
                         "n_ffn = 32\n[train]\nbatch_size = 64\nmax_steps = 1\n";
  Design design;
  design.name = "vision-design";
  design.base_config = base;
  design.stages = {{"", "", "", 64 * 17 * 100}, {"pattention_grow", "n_attn = 32, n_ffn = 64", "", 64 * 17 * 50}};
  const DesignPrediction prediction = design_predict(test_plugins(), design);
  ASSERT_EQ(prediction.error, "");
  ASSERT_EQ(prediction.stages.size(), 2u);
  EXPECT_EQ(prediction.family, "vision_tokenformer");
  EXPECT_EQ(prediction.corpus, "fashion-mnist");
  // 100 steps of 64 images of 17 tokens; FLOPs per step = 64 × training FLOPs per image.
  const ModelConfig small = model_config_load(test_plugins(), base);
  EXPECT_DOUBLE_EQ(prediction.stages[0].tokens, 100.0 * 64 * 17);
  EXPECT_DOUBLE_EQ(prediction.stages[0].flops,
                   100.0 * 64 * static_cast<double>(small.spec->flops_per_token(17).training_per_example()));
  EXPECT_EQ(prediction.stages[1].growth, "pattention_grow");
  EXPECT_GT(prediction.stages[1].parameters, prediction.stages[0].parameters);
}

TEST(Designer, PredictionIsTheEnginesPlanAndMatchesTheDryRun) {
  const Registry& plugins = test_plugins();
  DesignPrediction prediction = design_predict(plugins, three_stages());
  ASSERT_EQ(prediction.error, "");
  ASSERT_EQ(prediction.stages.size(), 3u);

  // By hand: tokens per step = batch 16 × T 128 = 2048; steps = ceil(tokens / 2048).
  ModelConfig base = model_config_load(plugins, kBase);
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{128, 512}, {256, 1024}, {512, 1024}};
  const std::vector<double> budgets = {2e5, 1e5, 1e5};
  double cumulative = 0, tokens = 0;
  for (std::size_t k = 0; k < 3; ++k) {
    const std::string config = "family = \"tokenformer\"\n[model]\nlayers = 4\nd = 128\nheads = 4\nn_attn = " +
                               std::to_string(sizes[k].first) + "\nn_ffn = " + std::to_string(sizes[k].second) +
                               "\nvocab = 256\nseq_len = 128\n";
    ModelConfig model = model_config_parse(plugins, toml::parse(config, std::string("stage.toml")), "stage.toml");
    const double steps = std::ceil(budgets[k] / 2048.0);
    const double flops = steps * 2048.0 * static_cast<double>(model.spec->flops_per_token(128).training());
    cumulative += flops;
    tokens += steps * 2048.0;
    SCOPED_TRACE(k);
    EXPECT_EQ(prediction.stages[k].parameters, model.spec->parameter_count());
    EXPECT_DOUBLE_EQ(prediction.stages[k].tokens, steps * 2048.0);
    EXPECT_DOUBLE_EQ(prediction.stages[k].flops, flops);
    EXPECT_DOUBLE_EQ(prediction.stages[k].cumulative_flops, cumulative);
    EXPECT_DOUBLE_EQ(prediction.stages[k].cumulative_tokens, tokens);
  }
  EXPECT_EQ(prediction.stages[1].growth, "pattention_grow");
  EXPECT_EQ(prediction.scratch.parameters, prediction.stages[2].parameters);
  EXPECT_GT(prediction.scratch.flops, prediction.stages[2].cumulative_flops);  // growing is cheaper here
  EXPECT_EQ(base.family, "tokenformer");

  // Saved next to nothing in particular: the config path is written relative to the file,
  // and `tfw run --dry-run` plans the same numbers.
  const std::string dir = "/tmp/tfw-test-designer";
  fs::remove_all(dir);
  const std::string path = dir + "/nested/test-design.toml";
  ASSERT_EQ(design_save(three_stages(), path, false), "");
  EXPECT_NE(design_save(three_stages(), path, false).find("exists: tick 'overwrite'"), std::string::npos);
  EXPECT_EQ(design_save(three_stages(), path, true), "");
  test::Result plan =
      test::capture(TFW_BINARY " run --dry-run --json " + path + " --home " + dir + "/home 2>/dev/null");
  ASSERT_EQ(plan.code, 0) << plan.output;
  nlohmann::json json = nlohmann::json::parse(plan.out);
  const nlohmann::json& runs = json["runs"];
  ASSERT_EQ(runs.size(), 4u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(runs[k]["name"], "stage" + std::to_string(k + 1));
    EXPECT_DOUBLE_EQ(runs[k]["cumulative_flops"].get<double>(), prediction.stages[k].cumulative_flops);
  }
  EXPECT_DOUBLE_EQ(runs[3]["training_flops"].get<double>(), prediction.scratch.flops);
}

TEST(Designer, PredictedLossesAreTheScratchLawAtEachSizeAndCumulativeTokens) {
  DesignPrediction prediction = design_predict(test_plugins(), three_stages());
  ASSERT_TRUE(prediction.error.empty()) << prediction.error;
  EXPECT_EQ(prediction.family, "tokenformer");
  EXPECT_EQ(prediction.corpus, "gcide");
  analysis::ScalingFit fit;
  fit.law = {1.5, 40, 0.3, 90, 0.25};
  fit.rms_log_error = 0.012;
  fit.n_min = 1e5, fit.n_max = 1e9, fit.d_min = 1e5, fit.d_max = 3.5e5;  // stage 3 (4e5 tokens) lies beyond
  const analysis::ScalingLaw& law = fit.law;
  design_predict_losses(prediction, fit, 9);
  ASSERT_EQ(prediction.stages.size(), 3u);
  // Cumulative tokens: 2e5, then 3e5, then 4e5 (each rounded up to whole steps by the plan).
  for (const StagePrediction& s : prediction.stages) {
    EXPECT_DOUBLE_EQ(s.predicted_loss, 1.5 + 40 / std::pow(static_cast<double>(s.parameters), 0.3) +
                                           90 / std::pow(s.cumulative_tokens, 0.25));
  }
  EXPECT_GT(prediction.stages[2].cumulative_tokens, prediction.stages[0].cumulative_tokens);
  EXPECT_DOUBLE_EQ(prediction.scratch.predicted_loss,
                   law.predict(static_cast<double>(prediction.scratch.parameters), prediction.scratch.tokens));
  EXPECT_NE(prediction.loss_note.find("knows nothing of growth"), std::string::npos) << prediction.loss_note;
  EXPECT_NE(prediction.loss_note.find("1.2% rms"), std::string::npos) << prediction.loss_note;
  EXPECT_FALSE(prediction.stages[0].extrapolated);
  EXPECT_TRUE(prediction.stages[2].extrapolated);
  EXPECT_NE(prediction.loss_note.find("extrapolations"), std::string::npos) << prediction.loss_note;
}

TEST(Designer, ABadDesignGetsTheEnginesMessage) {
  const Registry& plugins = test_plugins();
  Design design = three_stages();
  design.stages[1].model_changes = "n_atn = 128";
  DesignPrediction prediction = design_predict(plugins, design);
  EXPECT_NE(prediction.error.find("unknown key 'model.n_atn'"), std::string::npos) << prediction.error;
  EXPECT_NE(prediction.error.find("did you mean 'n_attn'"), std::string::npos) << prediction.error;
  EXPECT_TRUE(prediction.stages.empty());
  design = three_stages();
  design.stages[2].method = "no_such_method";
  EXPECT_NE(design_predict(plugins, design).error.find("no_such_method"), std::string::npos);
  design.base_config = "";
  EXPECT_EQ(design_predict(plugins, design).error, "choose a base run config");
}

// The designer's launch: the saved schedule goes to the engine service (here the GUI's
// embedded one on loopback), runs, and its runs reach the store; a second link on the same
// TFW_HOME connects to that service instead of starting another.
TEST(Designer, LaunchThroughTheEmbeddedServiceRunsTheSchedule) {
  const std::string dir = "/tmp/tfw-test-designer-launch";
  fs::remove_all(dir);
  fs::create_directories(dir + "/home");
  Design design;
  design.name = "launched";
  design.base_config = TFW_SOURCE_DIR "/experiments/mini/tiny-train-tokenformer.toml";
  design.stages = {{"", "", "", 16 * 64 * 6}, {"pattention_grow", "n_attn = 96", "", 16 * 64 * 4}};
  design.scratch_control = false;
  const std::string file = dir + "/launched.toml";
  ASSERT_EQ(design_save(design, file, false), "");
  ServiceLink link(dir + "/home", "", "");
  ASSERT_EQ(link.error(), "");
  EXPECT_EQ(link.description().rfind("embedded service 127.0.0.1:", 0), 0u) << link.description();
  ServiceLink second(dir + "/home", "", "");
  EXPECT_EQ(second.address(), link.address());
  EXPECT_NE(second.description().find("(tfw serve)"), std::string::npos);
  const nlohmann::json reply = link.submit_file(file);
  ASSERT_EQ(reply["runs"], nlohmann::json({"stage1", "stage2"}));
  const std::int64_t job = reply["job"];
  // The job is held by this client (issue 50): its capability is kept where `tfw cancel` finds it.
  EXPECT_EQ(reply["capability"].get<std::string>().size(), 32u);
  EXPECT_EQ(service::job_capability_of_job(link.address(), job), reply["capability"]);
  std::string status;
  for (int i = 0; i < 600 && status != "finished" && status != "failed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const nlohmann::json jobs = second.jobs();
    for (const auto& j : jobs["jobs"]) {
      if (j["id"] == job) status = j["status"];
    }
  }
  ASSERT_EQ(status, "finished");
  test::Result runs = test::capture(TFW_BINARY " runs list --json --home " + dir + "/home 2>/dev/null");
  ASSERT_EQ(runs.code, 0) << runs.output;
  nlohmann::json json = nlohmann::json::parse(runs.out);
  ASSERT_EQ(json["runs"].size(), 2u);
  EXPECT_EQ(json["runs"][1]["name"], "stage2");
  EXPECT_EQ(json["runs"][1]["growth_method"], "pattention_grow");
  EXPECT_EQ(json["runs"][1]["status"], "finished");
  EXPECT_EQ(json["runs"][1]["experiment"], "launched");
}

}  // namespace
}  // namespace tfw::gui
