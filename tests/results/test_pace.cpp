// A GPU run's time from what finished runs measured (workbench/results/pace.h): the median
// tokens/s of the finished GPU runs of the same model, batch, precision and device; nothing
// from CPU runs, unfinished runs or other shapes. Hand-computed.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "workbench/results/pace.h"

namespace tfw::results {
namespace {

std::string config(const std::string& device, int batch, int n_attn = 64) {
  return "family = \"tokenformer\"\n[model]\nd = 32\nn_attn = " + std::to_string(n_attn) + "\n[train]\ndevice = \"" +
         device + "\"\nprecision = \"bf16\"\nbatch_size = " + std::to_string(batch) + "\n";
}

RunRecord finished(const std::string& config_text, double tokens_per_second) {
  RunRecord r;
  r.status = RunStatus::finished;
  r.config = config_text;
  r.final_metrics = FinalMetrics::from_text("{\"tokens_per_second\": " + std::to_string(tokens_per_second) + "}");
  return r;
}

TEST(GpuPaces, TheMedianTokensPerSecondOfTheSameShapeOnAGpu) {
  GpuPaces paces;
  paces.add(finished(config("cuda", 16), 1000));
  paces.add(finished(config("cuda", 16), 3000));
  paces.add(finished(config("cuda", 16), 2000));
  paces.add(finished(config("cpu", 16), 10));           // a CPU run measures no GPU
  paces.add(finished(config("cuda", 8), 500));          // another batch
  RunRecord running = finished(config("cuda", 16), 1);  // not finished: passed over
  running.status = RunStatus::running;
  paces.add(running);
  std::size_t runs = 0;
  // 4,000 tokens at the median of 1,000, 2,000 and 3,000 tokens/s: 2 s.
  EXPECT_DOUBLE_EQ(paces.seconds(toml::parse(config("cuda", 16)), 4000, &runs), 2.0);
  EXPECT_EQ(runs, 3u);
  EXPECT_DOUBLE_EQ(paces.seconds(toml::parse(config("cuda", 8)), 4000, &runs), 8.0);
  EXPECT_EQ(runs, 1u);
  // Two runs: the mean of the middle two. Another model, or the CPU: not measured.
  paces.add(finished(config("cuda", 8), 1500));
  EXPECT_DOUBLE_EQ(paces.seconds(toml::parse(config("cuda", 8)), 4000), 4.0);
  EXPECT_TRUE(std::isnan(paces.seconds(toml::parse(config("cuda", 16, 128)), 4000, &runs)));
  EXPECT_EQ(runs, 0u);
  EXPECT_TRUE(std::isnan(paces.seconds(toml::parse(config("cpu", 16)), 4000)));
}

// train.grad_accum = "auto" (a split the memory chose) paces apart from a batch of 16 in one
// micro-batch, and from 2 micro-batches given by hand.
TEST(GpuPaces, AnAutoSplitPacesApartFromTheSplitsGivenByHand) {
  GpuPaces paces;
  paces.add(finished(config("cuda", 16) + "grad_accum = \"auto\"\n", 1000));
  paces.add(finished(config("cuda", 16), 4000));
  paces.add(finished(config("cuda", 16) + "grad_accum = 2\n", 2000));
  std::size_t runs = 0;
  EXPECT_DOUBLE_EQ(paces.seconds(toml::parse(config("cuda", 16) + "grad_accum = \"auto\"\n"), 4000, &runs), 4.0);
  EXPECT_EQ(runs, 1u);
  EXPECT_DOUBLE_EQ(paces.seconds(toml::parse(config("cuda", 16) + "grad_accum = 1\n"), 4000, &runs), 1.0);
  EXPECT_EQ(runs, 1u);
  EXPECT_DOUBLE_EQ(paces.seconds(toml::parse(config("cuda", 16) + "grad_accum = 2\n"), 4000, &runs), 2.0);
}

TEST(GpuPaces, ARecordWithoutTokensPerSecondOrWithAnUnreadableConfigMeasuresNothing) {
  GpuPaces paces;
  RunRecord no_rate = finished(config("cuda", 16), 1000);
  no_rate.final_metrics = FinalMetrics::from_text("{}");
  paces.add(no_rate);
  paces.add(finished("this is [not toml", 1000));
  EXPECT_TRUE(std::isnan(paces.seconds(toml::parse(config("cuda", 16)), 4000)));
}

}  // namespace
}  // namespace tfw::results
