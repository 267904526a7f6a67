// The engine service end to end on loopback with the real `tfw serve` and real sockets:
// a submitted experiment runs and its metrics stream in order; tokens are enforced; bad input
// (malformed JSON, unknown types, oversized lines, a path escaping TFW_HOME, a client leaving
// mid-message) gets an error and the service keeps serving; 200 subscribers of one run each
// receive every point; a service killed mid-run resumes the run at its next start.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "storage/store.h"
#include "tests/cli/run_command.h"
#include "tests/runner/tiny_lineage.h"
#include "workbench/service/serve_process.h"
#include "tests/service/service_helpers.h"
#include "workbench/service/client.h"
#include "workbench/service/protocol.h"

namespace tfw {
namespace {

using namespace test::service_helpers;  // fs, json, ServeProcess, serve, wait_for, ...

TEST(Service, SubmittedExperimentRunsAndItsMetricsStreamInOrder) {
  const std::string home = fresh_home("e2e");
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "") << server.first_line();
  service::Client client(server.address());
  EXPECT_EQ(client.hello()["version"], service::kProtocolVersion);
  json submitted =
      client.request({{"type", "submit"},
                      {"experiment", experiment_self_contained(TFW_SOURCE_DIR "/tests/data/tiny-experiment.toml")}});
  EXPECT_EQ(submitted["type"], "submitted");
  EXPECT_EQ(submitted["name"], "tiny");
  EXPECT_EQ(submitted["runs"], json({"small", "grown", "baseline"}));
  const std::int64_t job = submitted["job"];

  // Watch the first stage: retry until the job has created it, then read to its end.
  service::Client watcher(server.address());
  json reply;
  ASSERT_TRUE(wait_for(
      [&] {
        watcher.send({{"type", "watch"}, {"run", "small"}});
        reply = watcher.receive(30);
        return reply["type"] == "watching";
      },
      120))
      << reply.dump();
  std::map<std::string, std::vector<std::int64_t>> steps;
  std::string status = reply["run"]["status"];
  bool caught_up = false;
  while (!(caught_up && status == "finished")) {
    json message = watcher.receive(120);
    if (message["type"] == "metric") steps[message["key"]].push_back(message["step"]);
    if (message["type"] == "status" || message["type"] == "caught_up") status = message["status"];
    caught_up = caught_up || message["type"] == "caught_up";
    ASSERT_NE(message["type"], "error") << message.dump();
    ASSERT_NE(status, "failed");
  }
  auto store = Store::open_readonly(home + "/runs.db");
  const std::int64_t small = store->run_find("small")->id;
  ASSERT_FALSE(steps["train/loss"].empty());
  for (const auto& [key, seen] : steps) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    EXPECT_TRUE(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // no duplicates
    EXPECT_EQ(seen.size(), store->metrics(small, key).size());                // none missing
  }
  ASSERT_TRUE(wait_for([&] { return job_status(server.address(), job) == "finished"; }, 180));
  // The same lineage and budgets as the runner's own test (the same batch code ran it).
  test::expect_tiny_lineage(*store);
  json summary = client.request({{"type", "summary"}, {"run", "grown"}});
  EXPECT_EQ(summary["run"]["growth_method"], "pattention_grow");
  EXPECT_GT(summary["run"]["cumulative_flops"].get<double>(), summary["run"]["flops"].get<double>());
}

// Growth scripts are code: a service runs none that a client names, unless its operator allowed
// the folder that holds it (docs/security.md, "Growth scripts"); and then the job runs it.
TEST(Service, GrowthScriptsRunOnlyFromTheFolderTheOperatorAllowed) {
  const std::string home = fresh_home("scripts");
  const std::string allowed = home + "-allowed", elsewhere = home + "-elsewhere";
  for (const std::string& dir : {allowed, elsewhere}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(TFW_SOURCE_DIR "/examples/growth/zero_init_pattention.py", dir + "/grow.py");
  }
  fs::create_symlink(elsewhere + "/grow.py", allowed + "/link.py");  // inside by name, outside in fact
  auto experiment = [](const std::string& name, const std::string& script) {
    const std::string model = "layers = 1, d = 16, heads = 2, vocab = 256, seq_len = 16";
    return "[experiment]\nname = \"" + name + "\"\n[runs.small]\nfamily = \"tokenformer\"\nmodel = { " + model +
           ", n_attn = 8, n_ffn = 8 }\ntrain = { max_steps = 2, batch_size = 2, eval_batches = 1 }\n"
           "[runs.grown]\nfamily = \"tokenformer\"\nparent = \"small\"\nmodel = { " +
           model + ", n_attn = 16, n_ffn = 16 }\ntrain = { max_steps = 2, batch_size = 2, eval_batches = 1 }\n" +
           "growth = { method = \"script\", script = \"" + script + "\" }\n";
  };
  auto refused = [](service::Client& client, const json& message, const std::string& expected) {
    try {
      client.request(message);
      ADD_FAILURE() << "a growth script was accepted: " << message.dump();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  {
    ServeProcess server = serve(home);  // no folder allowed, whatever the caller's environment says
    ASSERT_NE(server.address(), "");
    service::Client client(server.address());
    refused(client, {{"type", "submit"}, {"experiment", experiment("a", allowed + "/grow.py")}},
            "growth by script is refused here");
    const std::string run =
        "family = \"tokenformer\"\n[model]\nlayers = 1\nd = 16\nheads = 2\nvocab = 256\n"
        "seq_len = 16\nn_attn = 8\nn_ffn = 8\n[train]\nmax_steps = 4\n[[train.growth]]\n"
        "at_step = 2\nmethod = \"script\"\nto = { n_attn = 16 }\noptions = { script = \"" +
        allowed + "/grow.py\" }\n";
    refused(client, {{"type", "submit"}, {"run", run}, {"name", "b"}}, "growth by script is refused here");
    EXPECT_TRUE(client.request({{"type", "jobs"}})["jobs"].empty());
    EXPECT_EQ(server.stop(), 0);
  }
  // A folder that overlaps TFW_HOME, where clients write files, is refused at the start.
  const test::Result overlap = test::capture(std::string(TFW_BINARY) + " serve --listen 127.0.0.1:0 --home " + home +
                                             " --allow-growth-scripts " + home + "/jobs/..");
  EXPECT_EQ(overlap.code, 2) << overlap.output;
  EXPECT_NE(overlap.err.find("it overlaps TFW_HOME"), std::string::npos) << overlap.err;
  ServeProcess server = serve(home, {"--allow-growth-scripts", allowed});
  ASSERT_NE(server.address(), "");
  EXPECT_NE(server.first_line().find("growth scripts from " + allowed), std::string::npos) << server.first_line();
  service::Client client(server.address());
  refused(client, {{"type", "submit"}, {"experiment", experiment("c", elsewhere + "/grow.py")}},
          "resolves outside " + allowed);
  refused(client, {{"type", "submit"}, {"experiment", experiment("d", allowed + "/link.py")}},
          "resolves outside " + allowed);
  const json submitted = client.request({{"type", "submit"}, {"experiment", experiment("e", allowed + "/grow.py")}});
  const std::int64_t job = submitted["job"];
  EXPECT_TRUE(wait_for(
      [&] { return job_status(server.address(), job) != "queued" && job_status(server.address(), job) != "running"; },
      240));
  EXPECT_EQ(job_status(server.address(), job), "finished");
  auto store = Store::open_readonly(home + "/runs.db");
  const std::optional<RunRecord> grown = store->run_in_experiment("e", "grown");
  ASSERT_TRUE(grown.has_value());
  EXPECT_EQ(grown->growth_method, "script");
  EXPECT_NE(grown->growth_options.find(allowed + "/grow.py"), std::string::npos) << grown->growth_options;
  EXPECT_EQ(server.stop(), 0);
}

TEST(Service, TokensAreRequiredWhereConfigured) {
  const std::string home = fresh_home("auth");
  std::ofstream(home + "/token") << "s3cret-token\n";
  std::ofstream(home + "/wrong") << "not-the-token\n";
  // Issue 33: a token file others can read is refused, by the service and by a client.
  test::Result readable =
      test::capture(TFW_BINARY " serve --listen 127.0.0.1:0 --home " + home + " --token-file " + home + "/token");
  EXPECT_EQ(readable.code, 2) << readable.output;
  EXPECT_NE(readable.output.find("can be read or written by other users (mode 0644)"), std::string::npos)
      << readable.output;
  EXPECT_NE(readable.output.find("chmod 600 " + home + "/token"), std::string::npos) << readable.output;
  for (const char* file : {"/token", "/wrong"})
    fs::permissions(home + file, fs::perms::owner_read | fs::perms::owner_write);
  ServeProcess guarded = serve(home, {"--token-file", home + "/token"});
  ASSERT_NE(guarded.address(), "") << guarded.first_line();
  try {
    service::Client client(guarded.address());
    FAIL() << "connected without a token";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a token"), std::string::npos) << e.what();
  }
  try {
    service::Client client(guarded.address(), home + "/wrong");
    FAIL() << "connected with a wrong token";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("wrong token"), std::string::npos) << e.what();
  }
  service::Client right(guarded.address(), home + "/token");
  EXPECT_TRUE(right.request({{"type", "jobs"}})["jobs"].empty());
  fs::permissions(home + "/wrong", fs::perms::others_read, fs::perm_options::add);
  try {
    service::Client client(guarded.address(), home + "/wrong");
    FAIL() << "a client read a token file others can read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("can be read or written by other users"), std::string::npos) << e.what();
  }

  // A loopback service without a token accepts clients that bring one (it has nothing to check).
  const std::string open_home = fresh_home("auth-open");
  ServeProcess open = serve(open_home);
  service::Client with_token(open.address(), home + "/token");
  EXPECT_EQ(with_token.hello()["type"], "hello");

  // Any other address without a token file is refused at start-up.
  test::Result refused = test::capture(TFW_BINARY " serve --listen 0.0.0.0:0 --home " + open_home);
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_NE(refused.output.find("refusing to listen on 0.0.0.0:0 without a token"), std::string::npos)
      << refused.output;
  test::Result bad = test::capture(TFW_BINARY " serve --listen localhost --home " + open_home);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("is not an address"), std::string::npos) << bad.output;
}

TEST(Service, BadInputGetsAnErrorAndTheServiceKeepsServing) {
  const std::string home = fresh_home("bad");
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "");
  auto answer = [&](const std::string& bytes) {
    RawSocket socket(server.address());
    socket.send_text(bytes);
    return socket.read_all();  // the service answers, then closes
  };
  const std::string hello = R"({"type":"hello","version":1})"
                            "\n";
  std::string reply = answer("this is not json\n");
  EXPECT_NE(reply.find(R"("fatal":true)"), std::string::npos) << reply;
  EXPECT_NE(reply.find("malformed message"), std::string::npos) << reply;
  reply = answer(R"({"type":"jobs"})"
                 "\n");
  EXPECT_NE(reply.find("the first message must be"), std::string::npos) << reply;
  reply = answer(R"({"type":"hello","version":7})"
                 "\n");
  EXPECT_NE(reply.find("protocol version mismatch"), std::string::npos) << reply;
  reply = answer(hello + R"({"type":"format_disk"})"
                         "\n");
  EXPECT_NE(reply.find("unknown message type 'format_disk'"), std::string::npos) << reply;
  reply = answer(hello + R"({"type":"cancel","job":"all"})"
                         "\n");
  EXPECT_NE(reply.find("cancel needs"), std::string::npos) << reply;
  reply = answer(hello + std::string(service::kMaxLine + 10, 'x'));
  EXPECT_NE(reply.find("message longer than 1048576 bytes"), std::string::npos) << reply;
  // Issue 33, finding 4: 70,000 nested arrays in a hello (echoed as reply_to, serialised
  // recursively) killed the service with SIGSEGV. Refused before parsing; the service lives on
  // (the requests below).
  reply = answer(R"({"type":"hello","version":1,"id":)" + std::string(70000, '[') + std::string(70000, ']') + "}\n");
  EXPECT_NE(reply.find("nested deeper than 64 levels"), std::string::npos) << reply.substr(0, 300);
  EXPECT_EQ(service::json_depth(R"({"a":[1,{"b":"[[[{{"}],"c":"\"["})"), 3);  // brackets in strings do not count
  {
    RawSocket leaver(server.address());  // disconnects in the middle of a message
    leaver.send_text(hello + R"({"type":"jo)");
  }
  {
    RawSocket silent(server.address());  // connects and says nothing: dropped after the handshake timeout
  }

  // Requests that are well-formed but wrong get an error and the connection stays usable.
  service::Client client(server.address());
  const std::string escape = "[experiment]\nname = \"escape\"\n[runs.x]\nconfig = \"../../../etc/passwd\"\n";
  try {
    client.request({{"type", "submit"}, {"experiment", escape}});
    FAIL() << "a path escaping TFW_HOME was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("runs.x.config = '../../../etc/passwd' escapes TFW_HOME"), std::string::npos)
        << e.what();
  }
  try {
    client.request({{"type", "submit"}, {"run", "family = \"tokenformer\"\n[model]\nlayers = 1\n"}, {"name", "../x"}});
    FAIL() << "a name with a path was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not a usable name"), std::string::npos) << e.what();
  }
  try {
    client.request(
        {{"type", "submit"}, {"run", "family = \"tokenformer\"\n[model]\nlayers = 1\nd = 8\n"}, {"name", "broken"}});
    FAIL() << "an invalid run config was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("model"), std::string::npos) << e.what();
  }
  try {
    client.request({{"type", "watch"}, {"run", "no-such-run"}});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no run 'no-such-run'"), std::string::npos);
  }
  EXPECT_TRUE(client.request({{"type", "jobs"}})["jobs"].empty());  // nothing was queued
  EXPECT_FALSE(fs::exists("/etc/passwd.tfw"));
  service::Client another(server.address());
  EXPECT_EQ(another.hello()["type"], "hello");
  EXPECT_EQ(server.stop(), 0);  // a clean exit after all of it
}

TEST(Service, TwoHundredSubscribersEachReceiveEveryPoint) {
  const std::string home = fresh_home("load");
  auto store = Store::open(home + "/runs.db");
  RunRecord record;
  record.name = "live";
  record.family = "tokenformer";
  const std::int64_t run = store->run_create(record);
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "");
  const int clients = 200, points = 300;
  std::vector<std::unique_ptr<service::Client>> subscribers;
  for (int i = 0; i < clients; ++i) {
    subscribers.push_back(std::make_unique<service::Client>(server.address()));
    subscribers.back()->send({{"type", "watch"}, {"run", run}});
  }
  std::atomic<int> complete{0}, failures{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < clients; ++i) {
    readers.emplace_back([&, i] {
      try {
        std::int64_t expected = 0;
        std::string status;
        while (!(expected == points && status == "finished")) {
          json message = subscribers[i]->receive(60);
          if (message["type"] == "metric") {
            if (message["step"] != expected) {
              ++failures;
              return;
            }
            ++expected;
          }
          if (message["type"] == "status" || message["type"] == "caught_up") status = message["status"];
        }
        ++complete;
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  {
    MetricWriter writer(home + "/runs.db");
    for (int step = 0; step < points; ++step) {
      writer.push({run, "train/loss", step, step * 64, step * 1e9, step * 0.01, 1.0 / (step + 1)});
      if (step % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    writer.flush();
  }
  store->run_finish(run, RunStatus::finished, "{}");
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(complete.load(), clients);
  EXPECT_EQ(server.stop(), 0);
}

TEST(Service, AServiceKilledMidRunResumesTheRunAtItsNextStart) {
  const std::string home = fresh_home("restart");
  std::optional<ServeProcess> server;
  server.emplace(serve(home));
  ASSERT_NE(server->address(), "");
  std::ifstream in(TFW_SOURCE_DIR "/experiments/mini/tiny-train-tokenformer.toml");
  std::string config((std::istreambuf_iterator<char>(in)), {});
  // Long enough to be killed in the middle: the kill comes at step 60 or so (past the first
  // checkpoint, at 50), and 240 steps leave seconds of training after it. (It had 600, and the
  // resume trained the rest: 10 s of the suite that no assertion reads.)
  config.replace(config.find("max_steps = 200"), 15, "max_steps = 240");
  json submitted = service::Client(server->address()).request({{"type", "submit"}, {"run", config}, {"name", "long"}});
  const std::int64_t job = submitted["job"];
  // Kill the service once the run has trained past its first checkpoint.
  auto steps = [&]() -> std::int64_t {
    if (!fs::exists(home + "/runs.db")) return 0;
    auto store = Store::open_readonly(home + "/runs.db");
    std::optional<RunRecord> run = store->run_find("long");
    if (!run) return 0;
    std::vector<MetricPoint> points = store->metrics(run->id, "train/loss");
    return points.empty() ? 0 : points.back().step;
  };
  ASSERT_TRUE(wait_for([&] { return steps() > 50; }, 120));
  server->stop(SIGKILL);
  server.reset();
  // Its job's `tfw run` gets SIGTERM with it: the run checkpoints and ends killed.
  auto status = [&] { return Store::open_readonly(home + "/runs.db")->run_find("long")->status; };
  ASSERT_TRUE(wait_for([&] { return status() == RunStatus::killed; }, 60)) << status_name(status());
  const std::int64_t id = Store::open_readonly(home + "/runs.db")->run_find("long")->id;
  EXPECT_LT(steps(), 240);

  server.emplace(serve(home));
  ASSERT_NE(server->address(), "");
  ASSERT_TRUE(wait_for([&] { return job_status(server->address(), job) == "finished"; }, 180))
      << job_status(server->address(), job);
  auto store = Store::open_readonly(home + "/runs.db");
  std::optional<RunRecord> run = store->run_find("long");
  EXPECT_EQ(run->id, id);  // the same run, resumed
  EXPECT_EQ(run->status, RunStatus::finished);
  EXPECT_EQ(store->metrics(run->id, "train/loss").back().step, 240);
  EXPECT_EQ(store->runs().size(), 1u);
}

TEST(Service, CommandLineClientsSubmitWatchListAndCancel) {
  const std::string home = fresh_home("cli");
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "");
  const std::string connect = " --connect " + server.address();
  // A run config with a long budget, submitted as a file: it becomes a one-run experiment.
  const std::string config = home + "/long-run.toml";
  {
    std::ifstream in(TFW_SOURCE_DIR "/experiments/mini/tiny-train-tokenformer.toml");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    text.replace(text.find("max_steps = 200"), 15, "max_steps = 100000");
    std::ofstream(config) << text;
  }
  test::Result submitted = test::capture(TFW_BINARY " submit " + config + connect + " --json 2>&1");
  ASSERT_EQ(submitted.code, 0) << submitted.output;
  const std::int64_t job = json::parse(submitted.out)["job"];
  // `tfw watch` streams it; stop reading after a few points (the run goes on).
  test::Result watched = test::capture(std::string("timeout 60 ") + TFW_BINARY " watch long-run --wait 60 --json" +
                                       connect + " | head -n 5");
  std::vector<json> lines;
  std::stringstream stream(watched.out);
  for (std::string line; std::getline(stream, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 5u) << watched.output;
  EXPECT_EQ(lines[0]["type"], "watching");
  EXPECT_EQ(lines[0]["run"]["name"], "long-run");
  // Compact: one line per step with the default keys; --keys filters by glob. Without
  // --connect, `tfw jobs --home` finds the service that serves that home (service.lock).
  test::Result compact =
      test::capture(std::string("timeout 60 ") + TFW_BINARY " watch long-run --compact" + connect + " | head -n 4");
  EXPECT_NE(compact.output.find("train/loss "), std::string::npos) << compact.output;
  EXPECT_NE(compact.output.find("  train/lr "), std::string::npos) << compact.output;
  EXPECT_EQ(compact.output.find("grad_norm"), std::string::npos) << compact.output;
  test::Result keys = test::capture(std::string("timeout 60 ") + TFW_BINARY " watch long-run --keys 'train/g*' --json" +
                                    connect + " | head -n 6");
  EXPECT_NE(keys.output.find("train/grad_norm"), std::string::npos) << keys.output;
  EXPECT_EQ(keys.output.find("\"key\":\"train/loss\""), std::string::npos) << keys.output;
  test::Result found = test::capture(TFW_BINARY " jobs --json --home " + home);
  ASSERT_EQ(found.code, 0) << found.output;
  EXPECT_EQ(json::parse(found.out)["jobs"].size(), 1u);
  test::Result listed = test::capture(TFW_BINARY " jobs --json" + connect);
  ASSERT_EQ(listed.code, 0) << listed.output;
  EXPECT_EQ(json::parse(listed.out)["jobs"][0]["status"], "running");
  // Issue 50: another client (one that did not submit it, so keeps no capability for it) is
  // refused, and the job runs on; `tfw cancel` on the submitting side sends the kept one.
  test::Result foreign =
      test::capture("TFW_STATE_DIR=" + home + "/another-client " TFW_BINARY " cancel " + std::to_string(job) + connect);
  EXPECT_EQ(foreign.code, 2) << foreign.output;
  EXPECT_NE(foreign.err.find("job " + std::to_string(job) + " is not held by this client"), std::string::npos)
      << foreign.err;
  EXPECT_EQ(job_status(server.address(), job), "running");
  test::Result cancelled = test::capture(TFW_BINARY " cancel " + std::to_string(job) + connect);
  ASSERT_EQ(cancelled.code, 0) << cancelled.output;
  EXPECT_NE(cancelled.output.find("job " + std::to_string(job) + " cancelled (it was running)"), std::string::npos);
  ASSERT_TRUE(wait_for([&] { return job_status(server.address(), job) == "cancelled"; }, 60));
  auto store = Store::open_readonly(home + "/runs.db");
  std::optional<RunRecord> run = store->run_find("long-run");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, RunStatus::killed);  // it checkpointed: `tfw run` (or a resubmission) continues it
  EXPECT_FALSE(store->checkpoints(run->id).empty());
  test::Result again = test::capture(TFW_BINARY " cancel " + std::to_string(job) + connect);
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.output.find("is cancelled: nothing to cancel"), std::string::npos) << again.output;
  test::Result second = test::capture(TFW_BINARY " serve --listen 127.0.0.1:0 --home " + home);
  EXPECT_EQ(second.code, 2) << second.output;  // one service per TFW_HOME: it names the one that runs
  EXPECT_NE(second.output.find("another tfw serve already serves " + home + " (listening on " + server.address() + ")"),
            std::string::npos)
      << second.output;
  test::Result nowhere = test::capture(TFW_BINARY " jobs --connect 127.0.0.1:1");
  EXPECT_EQ(nowhere.code, 1);
  EXPECT_NE(nowhere.output.find("cannot reach the service at 127.0.0.1:1"), std::string::npos) << nowhere.output;
  EXPECT_NE(nowhere.output.find("tfw serve"), std::string::npos) << nowhere.output;
}

}  // namespace
}  // namespace tfw
