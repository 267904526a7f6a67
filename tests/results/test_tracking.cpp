// The TensorBoard and MLflow writers' parts that can be checked by hand: the CRC-32C of
// TensorBoard's record framing against the standard's check value, the MLflow key of a tfw
// metric, and names that cannot become folders. The formats themselves are checked by the
// real readers (tests/results/tracking_readback.py, ctest tracking_readback).
#include <filesystem>
#include <string>

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/core/error.h"
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

// In `store`, one run of `experiment` named `name` and one training loss; its id.
std::int64_t one_run(tfw::Store& store, const std::string& experiment, const std::string& name) {
  tfw::RunRecord run;
  run.experiment = experiment;
  run.name = name;
  run.family = "tokenformer";
  run.config = "family = 'tokenformer'\n";
  store.experiment_ensure(experiment);
  const std::int64_t id = store.run_create(run);
  store.metrics_insert({tfw::MetricPoint{id, "train/loss", 1, 64, 1e6, 0.5, 2.5}});
  return id;
}

TEST(Tracking, ARunNameThatIsAPathIsRefusedAndNothingIsWrittenOutside) {
  const fs::path tmp = fs::temp_directory_path() / ("tfw-tracking-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "out");
  {
    auto store = tfw::Store::open((tmp / "runs.db").string());
    const std::int64_t id = one_run(*store, "hostile", "../../escaped-s0");
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

// Issue 50 (13): a link planted below the export's folder (a run's folder pointing elsewhere)
// made the TensorBoard and MLflow writers write outside it. Each writer's own layout is found
// by a first export; then, one folder at a time from DIR down to the folder that holds a run's
// files, that folder is a link to a folder outside, in a fresh DIR. Every export either refuses
// the link or replaces it (MLflow replaces a run's folder whole), and nothing is ever written
// outside; a run's own folder as a link is refused.
TEST(Tracking, ALinkPlantedBelowTheExportFolderIsNotWrittenThrough) {
  const fs::path tmp = fs::temp_directory_path() / ("tfw-tracking-link-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  auto store = tfw::Store::open((tmp / "runs.db").string());
  one_run(*store, "linked", "plain-s0");
  tfw::results::ExperimentResults set(*store, std::string("linked"));
  using Writer = std::vector<std::string> (*)(const tfw::results::ExperimentResults&, const std::string&);
  for (const auto& [label, write] : {std::pair<std::string, Writer>{"tensorboard", tfw::results::tensorboard_write},
                                     std::pair<std::string, Writer>{"mlflow", tfw::results::mlflow_write}}) {
    SCOPED_TRACE(label);
    const fs::path first = tmp / (label + "-first");
    write(set, first.string());
    fs::path holder;  // the deepest folder that holds a file
    for (const auto& entry : fs::recursive_directory_iterator(first)) {
      if (entry.is_regular_file() &&
          (holder.empty() || entry.path().parent_path().string().size() > holder.string().size())) {
        holder = entry.path().parent_path();
      }
    }
    ASSERT_FALSE(holder.empty());
    int refused = 0, level = 0;
    for (fs::path part = fs::relative(holder, first); !part.empty() && part != ".";
         part = part.parent_path(), ++level) {
      SCOPED_TRACE(part.string());
      const fs::path dir = tmp / fmt::format("{}-{}", label, level),
                     outside = tmp / fmt::format("{}-outside-{}", label, level);
      fs::create_directories((dir / part).parent_path());
      fs::create_directories(outside);
      fs::create_directory_symlink(outside, dir / part);
      try {
        write(set, dir.string());
        EXPECT_FALSE(fs::is_symlink(dir / part)) << "written with the link in place";
      } catch (const tfw::UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("leads outside"), std::string::npos) << e.what();
        refused += 1;
      }
      EXPECT_TRUE(fs::is_empty(outside)) << "files were written outside " << dir;
    }
    EXPECT_GE(refused, 1);
  }
  fs::remove_all(tmp);
}
