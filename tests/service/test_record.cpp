// Runs that record to a service (`tfw train --record-to`): a real `tfw serve` on loopback owns
// the store, and a training in another TFW_HOME (standing for another node, with no store of
// its own) streams its records to it. The service is stopped while the run trains and
// started again (nothing is lost), or stopped for good (the run says so and stops; it resumes
// once the service is back, and the store ends complete). Bad tokens and an unreachable
// service are clear errors that record nothing.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/process.h"
#include "storage/store.h"
#include "tests/cli/run_command.h"
#include "tests/service/service_helpers.h"

namespace tfw {
namespace test_record {  // named after the file: the suite compiles in batches (a unity build)

using namespace test::service_helpers;  // fs, json, ServeProcess, serve, wait_for, ...

const std::string kTiny = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";

// train/loss by step from a run folder's metrics.jsonl.
std::map<std::int64_t, double> jsonl_losses(const std::string& run_dir, std::size_t* lines = nullptr) {
  std::map<std::int64_t, double> losses;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::size_t count = 0;
  for (std::string line; std::getline(in, line);) {
    const json point = json::parse(line);
    count += 1;
    if (point["key"] == "train/loss") losses[point["step"].get<std::int64_t>()] = point["value"].get<double>();
  }
  if (lines != nullptr) *lines = count;
  return losses;
}

std::string sql(const std::string& home, const std::string& query) {
  return test::capture("sqlite3 " + home + "/runs.db \"" + query + "\"").out;
}

// 200 steps, checkpoints every 50: a test stops the service after the checkpoint at 50, and
// the run cannot end without it, since each later checkpoint waits until the service holds
// every point before it (remote_book.h). (They had 600 steps, and the resume trained 550.)
Process train_in_background(const std::string& node, const std::string& name, const std::string& address,
                            const std::string& log, std::vector<std::string> extra = {}) {
  ProcessSpec spec;
  spec.argv = {TFW_BINARY,
               "--threads",
               "1",
               "train",
               kTiny,
               "--home",
               node,
               "--name",
               name,
               "--record-to",
               address,
               "--set",
               "train.max_steps=200",
               "--set",
               "train.checkpoint_every=50"};
  spec.argv.insert(spec.argv.end(), extra.begin(), extra.end());
  spec.log_path = log;
  spec.environment = {"TFW_FIXED_THREADS=1"};
  return Process::spawn(spec);
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Record, ARunRecordsToAServiceFromAHomeWithoutAStore) {
  const std::string home = fresh_home("record");
  const std::string node = fresh_home("record-node");
  std::ofstream(home + "/token") << "record-token\n";
  std::ofstream(home + "/wrong") << "another\n";
  for (const char* file : {"/token", "/wrong"})
    fs::permissions(home + file, fs::perms::owner_read | fs::perms::owner_write);
  ServeProcess service = serve(home, {"--token-file", home + "/token"});
  ASSERT_NE(service.address(), "") << service.first_line();

  const test::Result run = test::capture(fmt::format("{} train {} --home {} --record-to {} --token-file {}/token",
                                                     TFW_BINARY, kTiny, node, service.address(), home));
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_FALSE(fs::exists(node + "/runs.db")) << "the node keeps no store";
  // Every point of metrics.jsonl is in the service's store, with its value.
  std::size_t lines = 0;
  const std::map<std::int64_t, double> losses = jsonl_losses(node + "/runs/tiny-train-tokenformer", &lines);
  ASSERT_EQ(losses.size(), 200u);
  EXPECT_EQ(sql(home, "SELECT COUNT(*) FROM metrics"), std::to_string(lines) + "\n");
  auto store = Store::open_readonly(home + "/runs.db");
  const std::vector<RunRecord> runs = store->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::finished);
  EXPECT_EQ(runs[0].run_dir, fs::absolute(node + "/runs/tiny-train-tokenformer").string());
  for (const MetricPoint& p : store->metrics(runs[0].id, "train/loss")) {
    EXPECT_NEAR(p.value, losses.at(p.step), 1e-8 * std::abs(p.value) + 1e-12) << "step " << p.step;
  }
  // The checkpoint rows name the node's files: the ones kept after pruning, no more.
  std::set<std::string> files, rows;
  for (const auto& entry : fs::directory_iterator(node + "/runs/tiny-train-tokenformer/checkpoints")) {
    if (entry.path().extension() == ".safetensors") files.insert(fs::absolute(entry.path()).string());
  }
  for (const CheckpointRow& row : store->checkpoints(runs[0].id)) rows.insert(row.path);
  EXPECT_EQ(rows, files);
  EXPECT_FALSE(rows.empty());
  EXPECT_NE(sql(home, "SELECT COUNT(*) FROM events WHERE kind = 'evaluation'"), "0\n");

  // A wrong token is refused before anything is recorded; so is an unreachable service.
  const test::Result wrong =
      test::capture(fmt::format("{} train {} --home {} --name other --record-to {} --token-file {}/wrong", TFW_BINARY,
                                kTiny, node, service.address(), home));
  EXPECT_EQ(wrong.code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("wrong token"), std::string::npos) << wrong.output;
  service.stop();
  const test::Result gone = test::capture(
      fmt::format("{} train {} --home {} --name other --record-to {}", TFW_BINARY, kTiny, node, service.address()));
  EXPECT_EQ(gone.code, 1) << gone.output;
  EXPECT_NE(gone.output.find("--record-to " + service.address() + ": cannot reach the service"), std::string::npos)
      << gone.output;
  EXPECT_EQ(sql(home, "SELECT COUNT(*) FROM runs"), "1\n");
  EXPECT_FALSE(fs::exists(node + "/runs/other/checkpoints")) << "nothing trained";
}

TEST(Record, AnOutageLosesNothingAndGivingUpIsSaidAndResumable) {
  const std::string home = fresh_home("record-outage");
  const std::string node = fresh_home("record-outage-node");
  std::string address;
  {
    ServeProcess service = serve(home);
    ASSERT_NE(service.address(), "") << service.first_line();
    address = service.address();
    Process run = train_in_background(node, "outage", address, node + "/outage.log");
    ASSERT_TRUE(wait_for([&] { return fs::exists(node + "/runs/outage/checkpoints/step-00000050.toml"); }, 120));
    service.stop();  // the service goes away while the run trains
    std::this_thread::sleep_for(std::chrono::seconds(3));
    ServeProcess again(TFW_BINARY, {"--listen", address, "--home", home});
    ASSERT_EQ(again.address(), address) << again.first_line();
    EXPECT_EQ(run.wait(), 0) << file_text(node + "/outage.log");
    std::size_t lines = 0;
    jsonl_losses(node + "/runs/outage", &lines);
    EXPECT_EQ(sql(home, "SELECT COUNT(*) FROM metrics"), std::to_string(lines) + "\n") << "no point lost";
    EXPECT_EQ(sql(home, "SELECT status FROM runs WHERE name = 'outage'"), "finished\n");
    const std::string log = file_text(node + "/outage.log");
    EXPECT_NE(log.find("lost the service at " + address), std::string::npos) << log;
    EXPECT_NE(log.find("is back; recording goes on"), std::string::npos) << log;
  }
  // Gone for good: the run gives up after TFW_RECORD_TIMEOUT, says so, and stops.
  {
    ServeProcess service(TFW_BINARY, {"--listen", address, "--home", home});
    ASSERT_EQ(service.address(), address) << service.first_line();
    ProcessSpec spec;
    Process run = [&] {
      setenv("TFW_RECORD_TIMEOUT", "2", 1);
      Process p = train_in_background(node, "giveup", address, node + "/giveup.log");
      unsetenv("TFW_RECORD_TIMEOUT");
      return p;
    }();
    ASSERT_TRUE(wait_for([&] { return fs::exists(node + "/runs/giveup/checkpoints/step-00000050.toml"); }, 120));
    service.stop(SIGKILL);
    EXPECT_EQ(run.wait(), 1);
    const std::string log = file_text(node + "/giveup.log");
    EXPECT_NE(log.find("gave up on the service at " + address), std::string::npos) << log;
    EXPECT_NE(log.find("were not recorded there"), std::string::npos) << log;
  }
  // Back again: resuming completes the run, and the store has every step's loss once. It
  // resumes with a changed setting (--set train.eval_batches=3): record_resume carries the new
  // config, and the service's store keeps the config that ran from then on.
  ServeProcess service(TFW_BINARY, {"--listen", address, "--home", home});
  ASSERT_EQ(service.address(), address) << service.first_line();
  const std::string config_before = sql(home, "SELECT config FROM runs WHERE name = 'giveup'");
  ASSERT_NE(config_before.find("eval_batches = 8"), std::string::npos) << config_before;
  const test::Result resumed =
      test::capture(fmt::format("TFW_FIXED_THREADS=1 {} --threads 1 train --resume {}/runs/giveup "
                                "--home {} --record-to {} --set train.eval_batches=3",
                                TFW_BINARY, node, node, address));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(sql(home, "SELECT status FROM runs WHERE name = 'giveup'"), "finished\n");
  const std::string config_after = sql(home, "SELECT config FROM runs WHERE name = 'giveup'");
  EXPECT_NE(config_after.find("eval_batches = 3"), std::string::npos) << config_after;
  EXPECT_EQ(config_after.find("eval_batches = 8"), std::string::npos) << config_after;
  EXPECT_EQ(sql(home,
                "SELECT COUNT(*) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.name = 'giveup' AND "
                "m.key = 'train/loss'"),
            "200\n");
}

}  // namespace test_record
}  // namespace tfw
