// Issue 13: the service attacked as an intruder or a careless user would, on loopback with
// the real `tfw serve`: files outside TFW_HOME (by corpus, by run name, by grid value, by a
// symlink), a store that must survive serve/submit/cancel/jobs twenty times over, a job that
// fails on its data followed by another, and more idle connections than it accepts.
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "storage/store.h"
#include "tests/cli/run_command.h"
#include "tests/service/service_helpers.h"
#include "workbench/service/job_queue.h"

namespace tfw {
namespace {

using namespace test::service_helpers;  // fs, json, ServeProcess, serve, wait_for, ...

const std::string kTiny = R"(
[defaults]
train = { batch_size = 4, lr = 3e-3, warmup_steps = 1, eval_every = 5, eval_batches = 1, checkpoint_every = 5, peak_flops = 1e11 }
)";

// One small run; no [data] when `corpus` is empty (the defaults' is used).
std::string tiny_run(const std::string& name, const std::string& corpus, int steps = 4) {
  return "[runs." + name +
         "]\nfamily = \"tokenformer\"\nmodel = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, "
         "vocab = 256, seq_len = 16 }\n" +
         (corpus.empty() ? "" : "data = { corpus = \"" + corpus + "\" }\n") +
         "train = { max_steps = " + std::to_string(steps) + " }\n";
}

std::string submit_error(service::Client& client, const std::string& experiment) {
  try {
    client.request({{"type", "submit"}, {"experiment", experiment}});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Everything in the store, as the CLI sees it, and SQLite's own verdict.
std::string integrity(const std::string& home) {
  return test::capture("sqlite3 " + home + "/runs.db 'PRAGMA integrity_check'").out;
}

TEST(ServiceAttack, NothingOutsideTheHomeIsReadOrWritten) {
  const std::string root = fresh_home("escape");
  const std::string home = root + "/home", cwd = root + "/cwd";
  fs::create_directories(home);
  fs::create_directories(cwd);
  fs::create_directories(root + "/decoy");
  std::ofstream(cwd + "/secret.txt") << "the service's working folder: secret\n";
  std::ofstream(root + "/decoy/secret2.txt") << "outside the home: secret\n";
  std::ofstream(root + "/decoy/real.json") << "{}";
  fs::create_directories(home + "/inside");
  fs::create_symlink(root + "/decoy/secret2.txt", home + "/inside/link.txt");
  // The service runs from `cwd`, as one started by hand in a folder with private files.
  const fs::path here = fs::current_path();
  fs::current_path(cwd);
  ServeProcess server = serve(home);
  fs::current_path(here);
  ASSERT_NE(server.address(), "");
  service::Client client(server.address());
  const std::string header = "[experiment]\nname = \"attack\"\n" + kTiny;
  struct Attempt {
    std::string experiment, expected;
  };
  // Relative paths resolve against the job's folder, TFW_HOME/jobs/ID/: three levels up
  // is outside the home.
  const std::vector<Attempt> attempts = {
      {header + tiny_run("a", "secret.txt"), "is neither a built-in corpus nor a file in TFW_HOME"},
      {header + tiny_run("a", "../../../decoy/secret2.txt"),
       "runs.a: data.corpus = '../../../decoy/secret2.txt' escapes TFW_HOME"},
      {header + tiny_run("a", "../../../../../../../etc/passwd"), "escapes TFW_HOME"},
      {header + tiny_run("a", "/etc/passwd"), "escapes TFW_HOME"},
      {header + tiny_run("a", root + "/decoy/secret2.txt"), "escapes TFW_HOME"},
      {header + tiny_run("a", "../../inside/link.txt"), "escapes TFW_HOME"},  // a symlink in the home, pointing out
      {"[experiment]\nname = \"attack\"\n[defaults]\ndata = { corpus = \"../../../decoy/secret2.txt\" }\n" +
           kTiny.substr(kTiny.find("train")) + tiny_run("a", ""),
       "runs.a: data.corpus = '../../../decoy/secret2.txt' escapes TFW_HOME"},
      {header + "[runs.\"../../../ESCAPED\"]\nfamily = \"tokenformer\"\n", "is not a usable run name"},
      {header + tiny_run("g", "kjv") + "grid = { \"data.corpus\" = [\"../../../../etc/passwd\"] }\n",
       "is not a usable run name"},
      {header + tiny_run("\"x$(touch${IFS}PWNED)\"", "kjv"), "is not a usable run name"},
      // Issue 33: data.tokenizer and a vision data.dataset outside the home were read, and the
      // reply said whether the file existed. Now refused alike, existing or not.
      {header +
           "[runs.t]\nfamily = \"tokenformer\"\nmodel = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, "
           "vocab = 256, seq_len = 16 }\ndata = { corpus = \"kjv\", tokenizer = \"" +
           root + "/decoy/real.json\" }\n",
       "data.tokenizer: '" + root + "/decoy/real.json' is outside"},
      {header +
           "[runs.t]\nfamily = \"tokenformer\"\nmodel = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, "
           "vocab = 256, seq_len = 16 }\ndata = { corpus = \"kjv\", tokenizer = \"" +
           root + "/decoy/none.json\" }\n",
       "data.tokenizer: '" + root + "/decoy/none.json' is outside"},
      {header + "[runs.t]\nfamily = \"tokenformer\"\nmodel = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, "
                "vocab = 256, seq_len = 16 }\ndata = { corpus = \"kjv\", tokenizer = \"../../../decoy/real.json\" }\n",
       "/decoy/real.json' is outside"},
      {header +
           "[runs.v]\nfamily = \"vit\"\nmodel = { layers = 1, d = 16, heads = 2, d_ffn = 32 }\n"
           "data = { dataset = \"" +
           root + "/decoy\" }\n",
       "data.dataset: '" + root + "/decoy' is outside"},
      {header + "[runs.huge]\nfamily = \"tokenformer\"\nmodel = { layers = 64, d = 1048576, heads = 4, n_attn = 64, "
                "n_ffn = 1048576, vocab = 256, seq_len = 16 }\ntrain = { max_steps = 1 }\n",
       "GB of memory to train"},
  };
  for (const Attempt& attempt : attempts) {
    SCOPED_TRACE(attempt.experiment);
    EXPECT_NE(submit_error(client, attempt.experiment).find(attempt.expected), std::string::npos)
        << submit_error(client, attempt.experiment);
  }
  EXPECT_TRUE(client.request({{"type", "jobs"}})["jobs"].empty());
  // A corpus inside the home is fine, relative to the job's folder.
  std::ofstream(home + "/inside/text.txt") << std::string(1400000, 'a');  // validation takes every 20th 64 KiB block
  const json accepted = client.request(
      {{"type", "submit"},
       {"experiment", "[experiment]\nname = \"fine\"\n" + kTiny + tiny_run("ok", "../../inside/text.txt")}});
  wait_for(
      [&] {
        const std::string status = job_status(server.address(), accepted["job"]);
        return status == "finished" || status == "failed";
      },
      120);
  ASSERT_EQ(job_status(server.address(), accepted["job"]), "finished");
  // Nothing was written outside the home, and no secret reached its prepared data.
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string path = entry.path().string();
    EXPECT_TRUE(path.rfind(home, 0) == 0 || path.rfind(cwd, 0) == 0 || path.rfind(root + "/decoy", 0) == 0) << path;
    EXPECT_EQ(path.find("ESCAPED"), std::string::npos) << path;
    if (path.rfind(home, 0) == 0 && entry.is_regular_file() && !entry.is_symlink()) {
      std::ifstream in(path, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      EXPECT_EQ(bytes.find("secret"), std::string::npos) << path << " holds a secret's text";
    }
  }
  EXPECT_FALSE(fs::exists(cwd + "/PWNED"));
  EXPECT_EQ(server.stop(), 0);
}

// The engine refuses a corpus outside its confinement even when the service's check was
// passed (a symlink swapped in after submission): TFW_CONFINE in `tfw train` itself.
TEST(ServiceAttack, AConfinedProcessRefusesACorpusOutsideItsFolder) {
  const std::string root = fresh_home("confine");
  fs::create_directories(root + "/home");
  std::ofstream(root + "/outside.txt") << std::string(20000, 'b');
  const test::Result run = test::capture("cd " + root + "/home && TFW_CONFINE=" + root +
                                         "/home " TFW_BINARY " train " TFW_SOURCE_DIR
                                         "/experiments/mini/tiny-train-tokenformer.toml "
                                         "--home . --set data.corpus='\"../outside.txt\"' --set train.max_steps=1");
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("data.corpus = '../outside.txt' is outside " + root + "/home"), std::string::npos)
      << run.output;
  EXPECT_FALSE(fs::exists(root + "/home/data/outside.txt-byte"));
}

// The corruption a new user hit: serve, submit, cancel, jobs; twenty times on one home.
// Every round the store must pass SQLite's integrity check, every job must still be listed,
// and the service must hold no deleted WAL or shm file.
TEST(ServiceAttack, TwentyRoundsOfSubmitCancelAndJobsKeepTheStoreWhole) {
  const std::string home = fresh_home("rounds");
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "");
  // Long enough that twenty short rounds, each resuming where the last stopped, never finish it.
  const std::string experiment = "[experiment]\nname = \"two-stage\"\n" + kTiny + tiny_run("small", "kjv", 20000);
  std::string capability;  // the first submit's: each round after it resumes that job's runs
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    service::Client client(server.address());
    json submit = {{"type", "submit"}, {"experiment", experiment}};
    if (round > 0) submit["capability"] = capability;
    const json submitted = client.request(submit);
    if (round == 0) capability = submitted["capability"];
    EXPECT_EQ(submitted["capability"], capability);
    const std::int64_t job = submitted["job"];
    wait_for([&] { return job_status(server.address(), job) == "running"; }, 10);
    test::capture(TFW_BINARY " runs list --home " + home);  // another process reads and closes
    client.request({{"type", "cancel"}, {"job", job}, {"capability", capability}});
    ASSERT_TRUE(wait_for([&] { return job_status(server.address(), job) == "cancelled"; }, 60));
    const json jobs = client.request({{"type", "jobs"}});
    EXPECT_EQ(jobs["jobs"].size(), static_cast<std::size_t>(round + 1));
    EXPECT_EQ(integrity(home), "ok\n");
    // Only what the service opened in its home counts: a descriptor it was handed (a test
    // runner's log that another run replaced) is not the store's.
    const test::Result fds = test::capture("ls -l /proc/" + std::to_string(server.pid()) + "/fd");
    std::istringstream lines(fds.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" -> " + home + "/") != std::string::npos) {
        EXPECT_EQ(line.find("(deleted)"), std::string::npos) << line;
      }
    }
  }
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(integrity(home), "ok\n");
  auto store = Store::open_readonly(home + "/runs.db");
  service::JobQueue jobs(*store);
  EXPECT_EQ(jobs.list().size(), 20u);
  for (const service::JobRow& job : jobs.list()) EXPECT_EQ(job.status, service::JobStatus::cancelled);
}

// Issue 50, finding 9: a job is held by the client that submitted it. Another client can
// neither cancel it (without its capability, or with a wrong one) nor submit a job under its
// name, which would resume its runs; a name whose runs no job made is refused too. Its holder
// cancels it and resumes it by submitting again with the capability.
TEST(ServiceAttack, AJobIsCancelledOrResumedOnlyByTheClientThatSubmittedIt) {
  const std::string home = fresh_home("held-jobs");
  // Runs trained in the home itself (experiment "default"): no job may take their name.
  ASSERT_EQ(test::capture(TFW_BINARY " train " + std::string(TFW_SOURCE_DIR) +
                          "/experiments/mini/tiny-train-tokenformer.toml --set train.max_steps=2 --home " + home)
                .code,
            0);
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "");
  const std::string experiment = "[experiment]\nname = \"held\"\n" + kTiny + tiny_run("small", "kjv", 20000);
  service::Client a(server.address());
  const json submitted = a.request({{"type", "submit"}, {"experiment", experiment}});
  const std::int64_t job = submitted["job"];
  const std::string capability = submitted["capability"];
  ASSERT_EQ(capability.size(), 32u);
  ASSERT_TRUE(wait_for([&] { return job_status(server.address(), job) == "running"; }, 30));
  auto refusal = [&](const json& message) {
    try {
      service::Client(server.address()).request(message);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(
      refusal({{"type", "cancel"}, {"job", job}}).find("job " + std::to_string(job) + " is not held by this client"),
      std::string::npos);
  EXPECT_NE(refusal({{"type", "cancel"}, {"job", job}, {"capability", std::string(32, '0')}}).find("does not match"),
            std::string::npos);
  EXPECT_NE(
      refusal({{"type", "submit"}, {"experiment", experiment}}).find("experiment 'held' is not held by this client"),
      std::string::npos);
  EXPECT_NE(
      refusal({{"type", "submit"}, {"experiment", "[experiment]\nname = \"default\"\n" + kTiny + tiny_run("s", "kjv")}})
          .find("experiment 'default' already has runs in this home that no job of this service made"),
      std::string::npos);
  EXPECT_EQ(job_status(server.address(), job), "running");
  EXPECT_EQ(a.request({{"type", "cancel"}, {"job", job}, {"capability", capability}})["was"], "running");
  ASSERT_TRUE(wait_for([&] { return job_status(server.address(), job) == "cancelled"; }, 60));
  // Its holder resumes it: the same name again, with the capability, keeps it.
  const json again = a.request({{"type", "submit"}, {"experiment", experiment}, {"capability", capability}});
  EXPECT_EQ(again["capability"], capability);
  EXPECT_EQ(a.request({{"type", "cancel"}, {"job", again["job"]}, {"capability", capability}})["type"], "cancelled");
  ASSERT_TRUE(wait_for([&] { return job_status(server.address(), again["job"]) == "cancelled"; }, 60));
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(integrity(home), "ok\n");
}

// A service started from a shell that holds a file open (as ctest holds its log) closes it:
// only what the service opened itself stays open for its life.
TEST(ServiceAttack, TheServiceKeepsNoDescriptorItWasHanded) {
  const std::string home = fresh_home("handed");
  const test::Result started =
      test::capture("exec 7>" + home + "/handed.log; " TFW_BINARY " serve --listen 127.0.0.1:0 --home " + home + " > " +
                    home + "/serve.log 2>&1 & echo $!");
  ASSERT_EQ(started.code, 0) << started.output;
  const pid_t pid = std::stoi(started.out);
  EXPECT_TRUE(wait_for(
      [&] {
        std::ifstream in(home + "/serve.log");
        std::stringstream log;
        log << in.rdbuf();
        return log.str().find("listening on") != std::string::npos;
      },
      60));
  const test::Result fds = test::capture("ls -l /proc/" + std::to_string(pid) + "/fd");
  EXPECT_EQ(fds.out.find("handed.log"), std::string::npos) << fds.out;
  EXPECT_NE(fds.out.find("runs.db"), std::string::npos) << "the service's own store is open: " << fds.out;
  kill(pid, SIGTERM);
  EXPECT_TRUE(wait_for([&] { return kill(pid, 0) != 0; }, 30));
}

// A job that fails on its data (a corpus shorter than one window), then one more job: both
// are recorded with their outcomes, and the store stays whole.
TEST(ServiceAttack, AJobThatFailsOnItsDataLosesNothing) {
  const std::string home = fresh_home("shortcorpus");
  std::ofstream(home + "/short.txt") << "too short";
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "");
  service::Client client(server.address());
  const json bad =
      client.request({{"type", "submit"},
                      {"experiment", "[experiment]\nname = \"short\"\n" + kTiny + tiny_run("s", "../../short.txt")}});
  ASSERT_TRUE(wait_for([&] { return job_status(server.address(), bad["job"]) == "failed"; }, 60));
  const json good = client.request(
      {{"type", "submit"}, {"experiment", "[experiment]\nname = \"fine\"\n" + kTiny + tiny_run("f", "kjv")}});
  ASSERT_TRUE(wait_for([&] { return job_status(server.address(), good["job"]) == "finished"; }, 120));
  const json jobs = client.request({{"type", "jobs"}});
  ASSERT_EQ(jobs["jobs"].size(), 2u);
  EXPECT_EQ(integrity(home), "ok\n");
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(test::capture(TFW_BINARY " runs list --home " + home).code, 0);
}

// More idle connections than the cap: the extra ones get an error and are closed; the
// service's descriptors stay bounded and it serves a new client afterwards.
TEST(ServiceAttack, IdleConnectionsBeyondTheCapAreTurnedAway) {
  const std::string home = fresh_home("connections");
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "");
  std::vector<std::unique_ptr<RawSocket>> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<RawSocket>(server.address()));
  // The last ones are beyond the cap of 256: an error line, then the connection closes.
  const std::string refused = idle.back()->read_all();
  EXPECT_NE(refused.find("too many connections"), std::string::npos) << refused;
  const test::Result fds = test::capture("ls /proc/" + std::to_string(server.pid()) + "/fd | wc -l");
  EXPECT_LT(std::stoi(fds.out), 300) << fds.output;
  // Garbage on some of the open ones: random bytes, a line of 2 MiB, JSON of the wrong shape.
  for (int i = 0; i < 20; ++i) {
    idle[i]->send_text(i % 3 == 0   ? std::string(2 << 20, 'x')
                       : i % 3 == 1 ? std::string("\x01\xff\x00garbage\n")
                                    : std::string("{\"type\": 7}\n"));
  }
  // Memory stays bounded: the resident size after all of it (printed for the issue's note).
  const test::Result rss = test::capture("grep VmRSS /proc/" + std::to_string(server.pid()) + "/status");
  std::cout << "service after 300 connections and garbage: " << rss.output << std::flush;
  const long kib = std::stol(rss.out.substr(rss.out.find_first_of("0123456789")));
  EXPECT_LT(kib, 400 * 1024) << rss.output;
  idle.clear();
  ASSERT_TRUE(wait_for(
      [&] {
        try {
          return service::Client(server.address()).hello()["type"] == "hello";
        } catch (const std::exception&) {
          return false;
        }
      },
      10));
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace tfw

namespace tfw {
namespace {

// Resident memory of a process, in MiB (VmRSS).
double resident_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

// Issue 33: after 3,500 submit+cancel cycles the jobs reply was 1 MB and `tfw jobs` failed
// every time; `{"type":"runs","after":1e300}` listed every run; 24 clients that stopped
// reading grew the service to 2 GB. Jobs are paged, "after" must be an id, and the bytes
// queued to all clients together are bounded.
TEST(ServiceAttack, ManyJobsArePagedAndClientsThatStopReadingCannotGrowTheService) {
  const std::string home = fresh_home("paging");
  {
    std::unique_ptr<Store> store = Store::open(home + "/runs.db");
    service::JobQueue jobs(*store);
    for (int i = 0; i < 3500; ++i) {
      service::JobRow job;
      job.name = fmt::format("job-{}", i);
      job.client = "127.0.0.1:1";
      const std::int64_t id = jobs.create(job);
      jobs.set_status(id, service::JobStatus::cancelled, -1, std::string(200, 'x'));
    }
  }
  ServeProcess server = serve(home);
  ASSERT_NE(server.address(), "") << server.first_line();
  {
    service::Client client(server.address());
    const json first = client.request({{"type", "jobs"}});
    EXPECT_TRUE(first["more"].get<bool>());
    EXPECT_LT(first.dump().size(), service::kMaxLine);
    EXPECT_LT(first["jobs"].size(), 3500u);
    EXPECT_EQ(service::jobs_all(client).size(), 3500u);
  }
  const test::Result listed = test::capture(TFW_BINARY " jobs --connect " + server.address() + " --json");
  ASSERT_EQ(listed.code, 0) << listed.output.substr(0, 400);
  EXPECT_EQ(json::parse(listed.out)["jobs"].size(), 3500u);
  {
    service::Client client(server.address());
    try {
      client.request({{"type", "runs"}, {"after", 1e300}});
      ADD_FAILURE() << "after = 1e300 was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("\"after\" must be an integer id"), std::string::npos) << e.what();
    }
  }
  // 24 clients ask for the first page (half a MiB) 200 times each and never read a byte.
  const double before = resident_mib(server.pid());
  std::vector<std::unique_ptr<RawSocket>> silent;
  const std::string hello = json({{"type", "hello"}, {"version", 1}}).dump() + "\n";
  const std::string ask = json({{"type", "jobs"}}).dump() + "\n";
  for (int c = 0; c < 24; ++c) {
    auto socket = std::make_unique<RawSocket>(server.address());
    ASSERT_GE(socket->fd, 0);
    socket->send_text(hello);
    for (int i = 0; i < 200; ++i) socket->send_text(ask);
    silent.push_back(std::move(socket));
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double after = resident_mib(server.pid());
  std::cout << "service resident memory: " << before << " MiB before, " << after << " MiB with 24 silent clients\n";
  EXPECT_LT(after - before, 300.0) << "the clients' queues grew past the 256 MiB bound";
  // The service still answers others.
  service::Client other(server.address());
  EXPECT_EQ(other.request({{"type", "jobs"}, {"after", 3499}})["jobs"].size(), 1u);
}

}  // namespace
}  // namespace tfw
