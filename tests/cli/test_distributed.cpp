// Data-parallel training end to end: real `tfw train` processes meeting through a real c10d
// TCPStore and averaging gradients through a real Gloo process group on this machine.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/dist/distributed.h"
#include "tests/cli/run_command.h"
#include "tests/support.h"

namespace test_distributed {

using tfw::test::capture;
using tfw::test::Result;

const std::string kTiny = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";

// Fixed threads: the comparison is of arithmetic, not of the governor's choices.
Result tfw(const std::string& arguments, const std::string& environment = "") {
  return capture("TFW_FIXED_THREADS=1 " + environment + " " TFW_BINARY " " + arguments);
}

Result shell(const std::string& script) {
  const std::string path = "/tmp/tfw-test-dp-script-" + std::to_string(getpid()) + ".sh";
  std::ofstream(path) << script << "\n";
  return capture("bash " + path);
}

// train/loss by step, from a run's metrics.jsonl (9 significant digits).
std::map<std::int64_t, double> train_losses(const std::string& run_dir) {
  std::map<std::int64_t, double> losses;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json point = nlohmann::json::parse(line);
    if (point["key"] == "train/loss") losses[point["step"].get<std::int64_t>()] = point["value"].get<double>();
  }
  return losses;
}

void expect_same_losses(const std::map<std::int64_t, double>& got, const std::map<std::int64_t, double>& want,
                        std::int64_t steps) {
  ASSERT_EQ(got.size(), static_cast<std::size_t>(steps));
  ASSERT_EQ(want.size(), static_cast<std::size_t>(steps));
  for (const auto& [step, loss] : want) {
    ASSERT_TRUE(got.count(step)) << "step " << step;
    EXPECT_NEAR(got.at(step), loss, 1e-5) << "step " << step;
  }
}

// The largest difference between the weights of two checkpoints of the tiny config.
double weight_difference(const std::string& a, const std::string& b) {
  const tfw::RunConfig config = tfw::run_config_load(tfw::test::plugins(), kTiny);
  auto model_a = tfw::test::plugins().family(config.model.family).build(*config.model.spec, 1);
  auto model_b = tfw::test::plugins().family(config.model.family).build(*config.model.spec, 2);
  tfw::checkpoint_load(a, *model_a, nullptr);
  tfw::checkpoint_load(b, *model_b, nullptr);
  const std::vector<torch::Tensor> pa = model_a->parameters(), pb = model_b->parameters();
  EXPECT_EQ(pa.size(), pb.size());
  double worst = 0;
  for (std::size_t i = 0; i < pa.size() && i < pb.size(); ++i)
    worst = std::max(worst, tfw::test::max_abs_diff(pa[i], pb[i]));
  return worst;
}

std::string sql(const std::string& home, const std::string& query) {
  return capture("sqlite3 " + home + "/runs.db \"" + query + "\"").out;
}

TEST(DataParallel, TwoRanksOfHalfTheBatchMatchOneRankOfTheWholeBatchForThirtySteps) {
  const std::string home = "/tmp/tfw-test-dp-exact";
  std::filesystem::remove_all(home);
  const std::string common = "train " + kTiny + " --home " + home + " --set train.max_steps=30 --json";
  const Result one = tfw(common + " --name one");
  ASSERT_EQ(one.code, 0) << one.output;
  const Result two = tfw(common + " --name two --nproc 2");
  ASSERT_EQ(two.code, 0) << two.output;
  const nlohmann::json summary = nlohmann::json::parse(two.out.substr(two.out.find("{\n")));
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_GT(summary["comm_seconds"].get<double>(), 0);
  // Every step's loss, and the final weights, within 1e-5 (float32 sums in another order).
  expect_same_losses(train_losses(home + "/runs/two"), train_losses(home + "/runs/one"), 30);
  EXPECT_LE(weight_difference(home + "/runs/one/checkpoints/step-00000030.safetensors",
                              home + "/runs/two/checkpoints/step-00000030.safetensors"),
            1e-5);
  // Rank 0 alone recorded it, with its world size; the other rank wrote nothing.
  EXPECT_EQ(sql(home, "SELECT COUNT(*) FROM runs"), "2\n");
  EXPECT_NE(sql(home, "SELECT payload FROM events WHERE kind = 'distributed'").find("\"world_size\":2"),
            std::string::npos);
  EXPECT_NE(sql(home, "SELECT final_metrics FROM runs WHERE name = 'two'").find("\"world_size\":2"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(home + "/logs") && !std::filesystem::is_empty(home + "/logs"))
      << "the ranks' logs are removed after a clean run";
}

TEST(DataParallel, ResumesOnAnotherWorldSizeWithTheSameGlobalBatches) {
  const std::string home = "/tmp/tfw-test-dp-resume";
  std::filesystem::remove_all(home);
  const std::string schedule = " --set train.schedule_steps=30 --set train.checkpoint_every=10";
  const Result reference =
      tfw("train " + kTiny + " --home " + home + " --name ref --set train.max_steps=30" + schedule);
  ASSERT_EQ(reference.code, 0) << reference.output;
  // Steps 1-10 on 2 ranks, 11-20 on 1, 21-30 on 4: the sampler state maps to any world size.
  const Result first =
      tfw("train " + kTiny + " --home " + home + " --name seg --nproc 2 --set train.max_steps=10" + schedule);
  ASSERT_EQ(first.code, 0) << first.output;
  const Result second = tfw("train --resume seg --home " + home + " --set train.max_steps=20");
  ASSERT_EQ(second.code, 0) << second.output;
  const Result third = tfw("train --resume seg --home " + home + " --nproc 4 --set train.max_steps=30");
  ASSERT_EQ(third.code, 0) << third.output;
  expect_same_losses(train_losses(home + "/runs/seg"), train_losses(home + "/runs/ref"), 30);
  EXPECT_LE(weight_difference(home + "/runs/ref/checkpoints/step-00000030.safetensors",
                              home + "/runs/seg/checkpoints/step-00000030.safetensors"),
            1e-5);
  EXPECT_EQ(sql(home, "SELECT status FROM runs WHERE name = 'seg'"), "finished\n");
}

TEST(DataParallel, BadInputIsAClearErrorAndRecordsNothing) {
  const std::string home = "/tmp/tfw-test-dp-bad";
  std::filesystem::remove_all(home);
  const std::string train = "train " + kTiny + " --home " + home;
  Result zero = tfw(train + " --nproc 0");
  EXPECT_EQ(zero.code, 2) << zero.output;
  EXPECT_NE(zero.output.find("--nproc 0: expected 1 or more processes"), std::string::npos) << zero.output;
  Result uneven = tfw(train + " --nproc 3");
  EXPECT_EQ(uneven.code, 2) << uneven.output;
  EXPECT_NE(uneven.output.find("train.batch_size = 16 does not split evenly over 3 ranks"), std::string::npos)
      << uneven.output;
  Result no_rank = tfw(train, "WORLD_SIZE=2");
  EXPECT_EQ(no_rank.code, 2) << no_rank.output;
  EXPECT_NE(no_rank.output.find("WORLD_SIZE is set but RANK is not"), std::string::npos) << no_rank.output;
  Result both = tfw(train + " --nproc 2", "RANK=0 WORLD_SIZE=2");
  EXPECT_EQ(both.code, 2) << both.output;
  EXPECT_NE(both.output.find("use one or the other"), std::string::npos) << both.output;
  // train.grad_accum = "auto" is one process's choice: refused before anything is recorded.
  Result automatic = tfw(train + " --nproc 2 --set train.grad_accum=auto");
  EXPECT_EQ(automatic.code, 2) << automatic.output;
  EXPECT_NE(automatic.output.find("train.grad_accum = \"auto\" chooses the micro-batch for one process"),
            std::string::npos)
      << automatic.output;

  // A port another program holds.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  Result busy = tfw(train + " --nproc 2", fmt::format("MASTER_PORT={}", ntohs(address.sin_port)));
  ::close(holder);
  EXPECT_EQ(busy.code, 2) << busy.output;
  EXPECT_NE(busy.output.find("the port is in use"), std::string::npos) << busy.output;
  EXPECT_EQ(busy.output.find("WARNING"), std::string::npos) << "c10d's glog noise is quiet: " << busy.output;

  // Two ranks started by hand with different configs: both refuse before training.
  const int port = tfw::dist_free_port();
  const std::string env = fmt::format("TFW_FIXED_THREADS=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} ", port);
  Result mismatch =
      shell(env + "RANK=0 " TFW_BINARY " " + train + " > " + home + "-r0.out 2>&1 & a=$!; " + env +
            "RANK=1 " TFW_BINARY " " + train + " --set train.lr=1e-3 > " + home +
            "-r1.out 2>&1; b=$?; wait $a; echo rc0=$? rc1=$b; cat " + home + "-r0.out " + home + "-r1.out");
  EXPECT_NE(mismatch.output.find("rc0=2 rc1=2"), std::string::npos) << mismatch.output;
  EXPECT_NE(mismatch.output.find("the ranks were started with different configs, refused: rank 1: [train] rank 0 has "
                                 "`lr = 0.003"),
            std::string::npos)
      << mismatch.output;
  EXPECT_NE(mismatch.output.find("this rank `lr = 0.001`"), std::string::npos) << mismatch.output;

  // A rank whose rank 0 never comes waits TFW_DIST_TIMEOUT, then says so.
  const auto started = std::chrono::steady_clock::now();
  Result alone =
      tfw(train, fmt::format("RANK=1 WORLD_SIZE=2 MASTER_PORT={} TFW_DIST_TIMEOUT=2", tfw::dist_free_port()));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(alone.code, 1) << alone.output;
  EXPECT_NE(alone.output.find("rank 1 could not reach rank 0's rendezvous"), std::string::npos) << alone.output;
  EXPECT_LT(waited, 30);

  // None of it left a run behind.
  EXPECT_EQ(sql(home, "SELECT COUNT(*) FROM runs"), "0\n");
}

// `tfw train --nproc 2` with a long budget in the background; waits for its step-6
// checkpoint, then runs `action` (bash, with $pid the launcher's pid).
Result train_then(const std::string& home, const std::string& action) {
  return shell("rm -rf " + home + "; TFW_FIXED_THREADS=1 " TFW_BINARY " train " + kTiny + " --home " + home +
               " --nproc 2 --set train.max_steps=100000 --set train.checkpoint_every=3 & pid=$!; "
               "for i in $(seq 1200); do [ -e " +
               home +
               "/runs/tiny-train-tokenformer/checkpoints/step-00000006.toml ] "
               "&& break; sleep 0.1; done; " +
               action + "; wait $pid; echo rc=$?");
}

TEST(DataParallel, AKilledRankEndsTheRunWithAnErrorThatNamesIt) {
  const std::string home = "/tmp/tfw-test-dp-kill";
  const auto started = std::chrono::steady_clock::now();
  Result run = train_then(home, "pkill -KILL -f -- '--threads 1 train --home " + home + "'");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 120);
  EXPECT_NE(run.output.find("rc=1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("the all-reduce of"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(") was killed by signal 9"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 1 (pid "), std::string::npos) << run.output;
  // The store keeps the run, failed, with its metrics; it resumes from its last checkpoint.
  EXPECT_EQ(sql(home, "SELECT status FROM runs"), "failed\n");
  EXPECT_NE(sql(home, "SELECT COUNT(*) FROM metrics WHERE key = 'train/loss'"), "0\n");
  Result resumed = tfw("train --resume tiny-train-tokenformer --home " + home +
                       " --nproc 2 --set train.max_steps=60 "
                       "--extend keep");
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(sql(home, "SELECT status FROM runs"), "finished\n");
}

TEST(DataParallel, CtrlCStopsEveryRankAtTheSameStepWithACheckpoint) {
  const std::string home = "/tmp/tfw-test-dp-int";
  Result run = train_then(home, "kill -INT $pid");
  EXPECT_NE(run.output.find("rc=130"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("interrupted; resume with"), std::string::npos) << run.output;
  EXPECT_EQ(sql(home, "SELECT status FROM runs"), "killed\n");
  // ("trai[n]": the shell that runs pgrep does not match itself.)
  EXPECT_EQ(capture("pgrep -f -- '--threads 1 trai[n] --home " + home + "'").out, "") << "no rank is left running";
}

}  // namespace test_distributed
