// `tfw train --profile STEPS` (issue 49): a Chrome trace that parses as JSON and holds the
// operators and the trainer's scopes, and a table whose categories add up to the steps' time
// as the trainer measured it (within 5%), through the real binary on the smallest run config;
// the kernel and operator names each category takes; and a count too large for the run's
// budget refused before anything is recorded.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/train/profile.h"
#include "tests/cli/run_command.h"

namespace test_profile {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

const std::string kTiny = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, false);
}

TEST(Profile, OperatorsAndKernelsFallIntoTheirCategories) {
  using tfw::profile_category_of;
  EXPECT_EQ(profile_category_of("aten::addmm", false), "matrix products");
  EXPECT_EQ(profile_category_of("aten::bmm", false), "matrix products");
  EXPECT_EQ(profile_category_of("aten::_scaled_dot_product_flash_attention_for_cpu", false), "attention");
  EXPECT_EQ(profile_category_of("aten::gelu", false), "other element-wise work");
  EXPECT_EQ(profile_category_of("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", true),
            "matrix products");
  EXPECT_EQ(profile_category_of("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", true), "matrix products");
  EXPECT_EQ(profile_category_of("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", true),
            "attention");
  EXPECT_EQ(profile_category_of("void tfw::pattention_cuda::(anonymous namespace)::forward_kernel<float>", true),
            "Pattention normalisation");
  EXPECT_EQ(profile_category_of(
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", true),
            "the optimiser");
  EXPECT_EQ(
      profile_category_of("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", true),
      "other element-wise work");
}

// The CUDA table from a hand-made device timeline (ms): a step's host range 0-100 with its
// annotation on the device too (it spans every kernel, and is no work of its own: counted, it
// put "other element-wise work" at 150% of the step on an H200); a GEMM 0-20; a Pattention
// normalisation scope 20-50 holding an element-wise kernel 20-30 (the composition's) and the
// fused kernel 30-40; an optimiser scope 60-70 holding its kernel 60-68; a GELU 80-90; 5 ms
// of data on the host. Each kernel counts once; the gaps are what no kernel covers, less the data.
TEST(Profile, OnTheDeviceEachKernelCountsOnceForTheScopeAroundItOrForItsName) {
  const std::uint64_t ms = 1000000;
  const std::vector<tfw::DeviceSpan> spans = {
      {"tfw::step", 0, 100 * ms, true},
      {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 0, 20 * ms, false},
      {"tfw::pattention_norm", 20 * ms, 50 * ms, true},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::exp_kernel_cuda>", 20 * ms, 30 * ms, false},
      {"void tfw::pattention_cuda::(anonymous namespace)::forward_kernel<__nv_bfloat16>", 30 * ms, 40 * ms, false},
      {"tfw::optimizer", 60 * ms, 70 * ms, true},
      {"void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor>", 60 * ms, 68 * ms, false},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl>", 80 * ms, 90 * ms, false}};
  tfw::ProfileReport report;
  tfw::device_categories(spans, 0, 100 * ms, 0.005, report);
  std::map<std::string, double> got;
  double sum = 0;
  for (const tfw::ProfileCategory& c : report.categories) got[c.name] = c.seconds, sum += c.seconds;
  EXPECT_DOUBLE_EQ(report.traced_seconds, 0.100);
  EXPECT_DOUBLE_EQ(got["matrix products"], 0.020);
  EXPECT_DOUBLE_EQ(got["attention"], 0.0);
  EXPECT_DOUBLE_EQ(got["Pattention normalisation"], 0.020);
  EXPECT_DOUBLE_EQ(got["other element-wise work"], 0.010);
  EXPECT_DOUBLE_EQ(got["the optimiser"], 0.008);
  EXPECT_DOUBLE_EQ(got["data"], 0.005);
  EXPECT_DOUBLE_EQ(got["host gaps"], 0.100 - 0.058 - 0.005);
  EXPECT_NEAR(sum, report.traced_seconds, 1e-12);
  // A kernel that runs past the last step's host end extends the steps' time to it.
  tfw::ProfileReport late;
  tfw::device_categories({{"nvjet_x", 90 * ms, 120 * ms, false}}, 0, 100 * ms, 0, late);
  EXPECT_DOUBLE_EQ(late.traced_seconds, 0.120);
  EXPECT_DOUBLE_EQ(late.categories.back().seconds, 0.090);  // host gaps: 0-90
}

TEST(Profile, ATraceAndATableThatAddUpToTheStepTime) {
  const std::string home = "/tmp/tfw-test-profile-" + std::to_string(::getpid());
  fs::remove_all(home);
  const Result trained =
      capture(fmt::format("{} train {} --home {} --profile 4 --set train.max_steps=8 "
                          "--set train.eval_every=100",
                          TFW_BINARY, kTiny, home));
  ASSERT_EQ(trained.code, 0) << trained.output;
  // Steps 1-3 warm up; 4-7 are recorded.
  EXPECT_NE(trained.err.find("profile of steps 4-7 on the CPU"), std::string::npos) << trained.err;
  const std::string dir = home + "/runs/tiny-train-tokenformer/profile";
  EXPECT_NE(trained.err.find("trace: " + dir + "/steps-4-7.trace.json"), std::string::npos) << trained.err;
  const nlohmann::json trace = read_json(dir + "/steps-4-7.trace.json");
  ASSERT_TRUE(trace.is_object() && trace.contains("traceEvents")) << "the trace is not Chrome's JSON";
  std::set<std::string> names;
  for (const auto& e : trace["traceEvents"]) {
    if (e.contains("name") && e["name"].is_string()) names.insert(e["name"].get<std::string>());
  }
  EXPECT_TRUE(names.count("aten::addmm") || names.count("aten::mm") || names.count("aten::bmm"));
  for (const char* scope : {"tfw::step", "tfw::optimizer", "tfw::data", "tfw::pattention_norm", "tfw::attention"}) {
    EXPECT_TRUE(names.count(scope)) << scope << " is not in the trace";
  }
  const nlohmann::json table = read_json(dir + "/steps-4-7.json");
  ASSERT_TRUE(table.is_object());
  EXPECT_EQ(table["first_step"], 4);
  EXPECT_EQ(table["last_step"], 7);
  std::vector<std::string> order;
  double sum = 0;
  for (const auto& c : table["categories"]) {
    order.push_back(c["name"]);
    EXPECT_GE(c["seconds"].get<double>(), 0) << c.dump();
    sum += c["seconds"].get<double>();
  }
  EXPECT_EQ(order, (std::vector<std::string>{"matrix products", "attention", "Pattention normalisation",
                                             "other element-wise work", "the optimiser", "data", "host gaps"}));
  for (std::size_t i : {0u, 1u, 2u, 3u, 4u, 5u})
    EXPECT_GT(table["categories"][i]["seconds"].get<double>(), 0) << order[i];
  const double traced = table["traced_seconds"], wall = table["wall_seconds"];
  EXPECT_NEAR(sum, traced, 1e-9 * traced);  // every operator's own time, once
  EXPECT_NEAR(traced, wall, 0.05 * wall) << "the trace covers " << traced << " s of the steps' " << wall << " s";
  fs::remove_all(home);
}

TEST(Profile, MoreStepsThanTheBudgetHasIsRefusedBeforeAnythingIsRecorded) {
  const std::string home = "/tmp/tfw-test-profile-budget-" + std::to_string(::getpid());
  fs::remove_all(home);
  const Result refused =
      capture(fmt::format("{} train {} --home {} --profile 10 --set train.max_steps=8", TFW_BINARY, kTiny, home));
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_NE(refused.err.find("--profile 10 needs 13 steps (3 of warm-up first), and the run has 8 left"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(capture("sqlite3 " + home + "/runs.db 'SELECT COUNT(*) FROM runs' 2>/dev/null || echo 0").out, "0\n");
  fs::remove_all(home);
}

}  // namespace test_profile
