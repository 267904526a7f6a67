// The TensorBoard and MLflow writers' parts that can be checked by hand: the CRC-32C of
// TensorBoard's record framing against the standard's check value, the MLflow key of a tfw
// metric, and names that cannot become folders. The formats themselves are checked by the
// real readers (tests/results/tracking_readback.py, ctest tracking_readback).
#include <filesystem>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "storage/store.h"
#include "workbench/results/results.h"
#include "workbench/results/tracking.h"

namespace fs = std::filesystem;

TEST(Tracking, Crc32cMatchesTheStandardCheckValue) {
  // RFC 3720 (iSCSI), appendix B.4: CRC-32C of "123456789" is 0xE3069283; of 32 zero bytes 0x8A9136AA.
  const std::string digits = "123456789";
  EXPECT_EQ(tfw::results::crc32c(digits.data(), digits.size()), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(tfw::results::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  // Chained over two halves, the same as over the whole.
  EXPECT_EQ(tfw::results::crc32c(digits.data() + 4, 5, tfw::results::crc32c(digits.data(), 4)), 0xE3069283u);
}

TEST(Tracking, MlflowKeysSpellTheCorpusOut) {
  EXPECT_EQ(tfw::results::mlflow_metric_key("val/loss@kjv"), "val/loss_at_kjv");
  EXPECT_EQ(tfw::results::mlflow_metric_key("train/loss"), "train/loss");
}

TEST(Tracking, ARunNameThatIsAPathIsRefusedAndNothingIsWrittenOutside) {
  const fs::path tmp = fs::temp_directory_path() / ("tfw-tracking-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "out");
  {
    auto store = tfw::Store::open((tmp / "runs.db").string());
    tfw::RunRecord run;
    run.experiment = "hostile";
    run.name = "../../escaped-s0";
    run.family = "tokenformer";
    run.config = "family = 'tokenformer'\n";
    store->experiment_ensure("hostile");
    const std::int64_t id = store->run_create(run);
    store->metrics_insert({tfw::MetricPoint{id, "train/loss", 1, 64, 1e6, 0.5, 2.5}});
    tfw::results::ExperimentResults set(*store, std::string("hostile"));
    ASSERT_EQ(set.runs().size(), 1u);
    try {
      tfw::results::tensorboard_write(set, (tmp / "out" / "tb").string());
      FAIL() << "a run name with '/' became a folder";
    } catch (const tfw::Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot be a folder name"), std::string::npos) << e.what();
    }
    // MLflow folders are ids derived from names; a metric key with a '..' part is refused.
    store->metrics_insert({tfw::MetricPoint{id, "../../escaped", 1, 64, 1e6, 0.5, 2.5}});
    try {
      tfw::results::mlflow_write(set, (tmp / "out" / "ml").string());
      FAIL() << "a metric key with '..' became a path";
    } catch (const tfw::Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a key MLflow can store"), std::string::npos) << e.what();
    }
  }
  for (const auto& entry : fs::recursive_directory_iterator(tmp)) {
    EXPECT_EQ(entry.path().string().find("escaped"), std::string::npos) << entry.path();
  }
  EXPECT_FALSE(fs::exists(tmp.parent_path() / "escaped-s0"));
  fs::remove_all(tmp);
}
