// Issue 33, findings 2 and 3: the record API cannot be turned against runs a client did not
// create. Through the real `tfw serve` on loopback and a run recorded by the real
// `tfw train --record-to`: clearing, rewriting and finishing another client's run are refused,
// a record that names another home's run folder is never written to, and a finished run with
// checkpoints is never cleared.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "tests/cli/run_command.h"
#include "tests/service/service_helpers.h"

namespace tfw {
namespace test_record_rights {  // named after the file: the suite compiles in batches (a unity build)

using namespace test::service_helpers;

const std::string kTiny = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";
const std::string kRun = "tiny-train-tokenformer";

std::string sql(const std::string& home, const std::string& query) {
  return test::capture("sqlite3 " + home + "/runs.db \"" + query + "\"").out;
}

// The error a request gets ("(accepted)" when it is not refused). A refused request closes
// its connection, so each one gets its own.
std::string refusal(const std::string& address, const json& message) {
  try {
    service::Client client(address);
    client.request(message);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Every file under `dir` with its bytes, for "nothing changed".
std::string snapshot(const std::string& dir) {
  return test::capture("cd " + dir + " && find . -type f -print0 | sort -z | xargs -0 md5sum").out;
}

TEST(RecordRights, AClientTouchesOnlyTheRunsItCreated) {
  const std::string home = fresh_home("rights"), node = fresh_home("rights-node");
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "") << server.first_line();
  const test::Result trained = test::capture(
      fmt::format("{} train {} --home {} --record-to {} --set train.max_steps=20 --set train.checkpoint_every=10 "
                  "--set train.eval_every=10",
                  TFW_BINARY, kTiny, node, server.address()));
  ASSERT_EQ(trained.code, 0) << trained.output;
  const std::string id = sql(home, "SELECT id FROM runs").substr(0, 1);
  const std::string before = sql(home,
                                 "SELECT status, tokens FROM runs; SELECT COUNT(*), SUM(value) FROM metrics; "
                                 "SELECT COUNT(*) FROM checkpoints");
  ASSERT_NE(before.find("finished"), std::string::npos) << before;
  std::string capability;
  std::ifstream(node + "/runs/" + kRun + "/record-capability") >> capability;
  ASSERT_EQ(capability.size(), 32u);
  EXPECT_EQ(fs::status(node + "/runs/" + kRun + "/record-capability").permissions() & fs::perms::group_all,
            fs::perms::none);

  const std::int64_t run = std::stoll(id);
  const json fake_points = json::array({json::array({"val/loss", 20, 0, 0.0, 0.0, 0.001})});
  for (const std::string& held : {std::string(), std::string(32, '0')}) {
    SCOPED_TRACE(held.empty() ? "no capability" : "a wrong capability");
    json clear = {{"type", "record_clear"}, {"experiment", "default"}, {"name", kRun}};
    json points = {{"type", "record"}, {"run", run}, {"points", fake_points}, {"events", json::array()}};
    json finish = {{"type", "record_finish"}, {"run", run},       {"status", "failed"}, {"tokens", 1}, {"flops", 1.0},
                   {"final_metrics", "{}"},   {"error", "forged"}};
    json checkpoint = {{"type", "record_checkpoint"}, {"run", run}, {"removed", "/anything"}};
    json resume = {{"type", "record_resume"}, {"run", run}};
    for (json* message : {&clear, &points, &finish, &checkpoint, &resume}) {
      if (!held.empty()) (*message)["capability"] = held;
      EXPECT_NE(refusal(server.address(), *message).find("is not held by this client"), std::string::npos)
          << message->dump();
    }
  }
  // Even its holder cannot clear a run that has checkpoints: it is history, not a failed start.
  EXPECT_NE(refusal(server.address(),
                    {{"type", "record_clear"}, {"experiment", "default"}, {"name", kRun}, {"capability", capability}})
                .find("already has checkpoints"),
            std::string::npos);
  EXPECT_EQ(sql(home,
                "SELECT status, tokens FROM runs; SELECT COUNT(*), SUM(value) FROM metrics; "
                "SELECT COUNT(*) FROM checkpoints"),
            before);
  // Its holder may write to it: the node resumes the run and records the new steps (batch 16, 64 tokens each).
  const test::Result resumed = test::capture(
      fmt::format("{} train --resume {}/runs/{} --home {} --record-to {} --extend keep --set train.max_steps=30",
                  TFW_BINARY, node, kRun, node, server.address()));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(sql(home, "SELECT status, tokens FROM runs"), "finished|" + std::to_string(30 * 16 * 64) + "\n");

  // Issue 50: a record's lineage attaches it under its parent, which then cannot be deleted.
  // Another client may not name this run as a parent, by id or through its checkpoint.
  const std::string checkpoint = node + "/runs/" + kRun + "/checkpoints/step-00000030.safetensors";
  json create = {{"type", "record_create"},
                 {"record",
                  {{"experiment", "default"},
                   {"name", "forged-child"},
                   {"family", "tokenformer"},
                   {"config", ""},
                   {"seed", 0},
                   {"git_commit", "x"},
                   {"host", "x"},
                   {"parameters", 1},
                   {"run_dir", "/tmp/tfw-test-forged-child"}}}};
  for (const json& lineage :
       {json{{"checkpoint", "/nowhere.safetensors"}, {"parent_run", run}},
        json{{"checkpoint", checkpoint}, {"parent_run", 0}},
        json{{"checkpoint", checkpoint}, {"parent_run", run}, {"parent_capability", std::string(32, '0')}}}) {
    SCOPED_TRACE(lineage.dump());
    create["lineage"] = lineage;
    create["lineage"]["inherited_flops"] = 0.0;
    create["lineage"]["growth_method"] = create["lineage"]["growth_options"] = "";
    EXPECT_NE(
        refusal(server.address(), create).find("names run " + id + " as the parent, which is not held by this client"),
        std::string::npos);
  }
  EXPECT_EQ(sql(home, "SELECT COUNT(*) FROM runs"), "1\n");
  // Its holder grows from it: `tfw train --init-from` its checkpoint sends the capability kept in its folder.
  const test::Result child = test::capture(
      fmt::format("{} train {} --home {} --record-to {} --name child --init-from {} --set train.max_steps=2",
                  TFW_BINARY, kTiny, node, server.address(), checkpoint));
  EXPECT_EQ(child.code, 0) << child.output;
  EXPECT_EQ(sql(home, "SELECT parent_run_id FROM runs WHERE name = 'child'"), id + "\n");
}

TEST(RecordRights, ARecordNeverMakesTheServiceWriteOutsideItsHome) {
  const std::string root = fresh_home("rights-folder");
  const std::string home = root + "/home", victim = root + "/victim";
  fs::create_directories(home);
  // Another home's finished run, with checkpoints.
  const test::Result other =
      test::capture(fmt::format("{} train {} --home {} --name base --set train.max_steps=4 "
                                "--set train.checkpoint_every=2",
                                TFW_BINARY, kTiny, victim));
  ASSERT_EQ(other.code, 0) << other.output;
  const std::string untouched = snapshot(victim);
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "") << server.first_line();
  auto create = [&](const std::string& run_dir) {
    return json{{"type", "record_create"},
                {"record",
                 {{"experiment", "okexp"},
                  {"name", "base"},
                  {"family", "tokenformer"},
                  {"config", ""},
                  {"seed", 0},
                  {"git_commit", ""},
                  {"host", "h"},
                  {"parameters", 1},
                  {"run_dir", run_dir}}}};
  };
  // Another run's folder in the service's home cannot be claimed, nor a relative one. (The
  // run's own folder there can: a cluster's nodes write into the service's shared home.)
  EXPECT_NE(
      refusal(server.address(), create(home + "/runs/other/run")).find("a client may not claim another run's folder"),
      std::string::npos);
  EXPECT_NE(refusal(server.address(), create(home + "/runs/okexp/base/../../other/run")).find("may not claim"),
            std::string::npos);
  EXPECT_NE(refusal(server.address(), create("runs/okexp/base")).find("must be an absolute path"), std::string::npos);
  // Another folder can be named (it is the client's own machine's), but the service never
  // writes there. A job under the same names would resume that record: since issue 50 it is
  // refused when submitted (the name's runs were not made by a job), and before that it failed
  // when it started (run_recorded writes a run only inside its home).
  ASSERT_EQ(refusal(server.address(), create(victim + "/runs/base")), "(accepted)");
  EXPECT_NE(refusal(server.address(), {{"type", "submit"},
                                       {"experiment",
                                        "[experiment]\nname = \"okexp\"\n[runs.base]\nfamily = \"tokenformer\"\n"
                                        "model = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, vocab = 256, "
                                        "seq_len = 16 }\ndata = { corpus = \"kjv\" }\ntrain = { max_steps = 4, "
                                        "batch_size = 4, checkpoint_every = 2 }\n"}})
                .find("experiment 'okexp' already has runs in this home that no job of this service made"),
            std::string::npos);
  const std::string id = sql(home, "SELECT id FROM runs WHERE run_dir = '" + victim + "/runs/base'");
  ASSERT_FALSE(id.empty());
  const test::Result resumed =
      test::capture(fmt::format("{} train --resume {} --home {}", TFW_BINARY, id.substr(0, id.size() - 1), home));
  EXPECT_EQ(resumed.code, 2) << resumed.output;
  EXPECT_NE(resumed.err.find("tfw writes a run only inside its TFW_HOME"), std::string::npos) << resumed.err;
  EXPECT_EQ(snapshot(victim), untouched);
}

}  // namespace test_record_rights
}  // namespace tfw
