// RunSource, local and remote: over a real loopback `tfw serve`, a RemoteRunSource yields
// exactly the records, metric points, events and checkpoints that the LocalRunSource reads
// from the same store: for the runs of a real tiny experiment (lineage, growth events,
// checkpoints), and for a run written here with the values a wire format gets wrong (NaN,
// ±inf, 0.1 + 0.2, denormals, final metrics and payloads in odd formatting, a payload that
// is not JSON) and enough points that the service must page its replies. Then again
// incrementally, after more points arrive. Malformed read requests get clear errors.
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "runner/run_source.h"
#include "storage/store.h"
#include "tests/cli/run_command.h"
#include "tests/service/service_helpers.h"
#include "workbench/service/client.h"
#include "workbench/service/remote_source.h"

namespace tfw {
namespace {

using namespace test::service_helpers;  // fs, json, ServeProcess, serve, ...

// Equal to the bit, except that any NaN equals any NaN.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <typename T>
bool same(const T& a, const T& b) {
  return a == b;
}

// Every field, by name (a field added to RunRecord must be added here).
#define EXPECT_SAME_FIELD(field) EXPECT_TRUE(same(a.field, b.field)) << #field << " differs"

void expect_same(const RunRecord& a, const RunRecord& b) {
  SCOPED_TRACE("run " + std::to_string(a.id));
  EXPECT_SAME_FIELD(id);
  EXPECT_SAME_FIELD(experiment);
  EXPECT_SAME_FIELD(name);
  EXPECT_SAME_FIELD(family);
  EXPECT_SAME_FIELD(config);
  EXPECT_SAME_FIELD(status);
  EXPECT_SAME_FIELD(heartbeat);
  EXPECT_SAME_FIELD(seed);
  EXPECT_SAME_FIELD(git_commit);
  EXPECT_SAME_FIELD(host);
  EXPECT_SAME_FIELD(started);
  EXPECT_SAME_FIELD(ended);
  EXPECT_SAME_FIELD(parent);
  EXPECT_SAME_FIELD(growth_method);
  EXPECT_SAME_FIELD(growth_options);
  EXPECT_SAME_FIELD(stage);
  EXPECT_SAME_FIELD(parameters);
  EXPECT_SAME_FIELD(tokens);
  EXPECT_SAME_FIELD(flops);
  EXPECT_SAME_FIELD(inherited_flops);
  EXPECT_SAME_FIELD(cumulative_flops);
  EXPECT_SAME_FIELD(final_metrics);
  EXPECT_SAME_FIELD(error);
  EXPECT_SAME_FIELD(run_dir);
}

// Returns the number of points compared.
std::size_t expect_same(const RunNews& a, const RunNews& b) {
  EXPECT_EQ(a.points.size(), b.points.size());
  EXPECT_EQ(a.events.size(), b.events.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < std::min(a.points.size(), b.points.size()); ++i) {
    const MetricPoint &p = a.points[i], &q = b.points[i];
    const bool equal = p.run == q.run && p.key == q.key && p.step == q.step && p.tokens == q.tokens &&
                       same(p.flops, q.flops) && same(p.wall, q.wall) && same(p.value, q.value);
    if (!equal && ++mismatches <= 5) {
      ADD_FAILURE() << "point " << i << ": " << p.key << "@" << p.step << " = " << p.value << " vs " << q.key << "@"
                    << q.step << " = " << q.value;
    }
  }
  for (std::size_t i = 0; i < std::min(a.events.size(), b.events.size()); ++i) {
    const EventRow &e = a.events[i], &f = b.events[i];
    EXPECT_TRUE(e.run == f.run && e.id == f.id && e.kind == f.kind && e.step == f.step && same(e.wall, f.wall) &&
                e.payload == f.payload)
        << "event " << i << ": " << e.kind << " " << e.payload << " vs " << f.kind << " " << f.payload;
  }
  return a.points.size();
}

void expect_same(const RunCursor& a, const RunCursor& b) {
  EXPECT_EQ(a.last_step, b.last_step);
  EXPECT_EQ(a.last_event, b.last_event);
}

void expect_same(const std::vector<CheckpointRow>& a, const std::vector<CheckpointRow>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i].run == b[i].run && a[i].step == b[i].step && a[i].bytes == b[i].bytes && a[i].path == b[i].path &&
                a[i].checksum == b[i].checksum)
        << a[i].path << " vs " << b[i].path;
  }
}

const std::vector<double> kAwkward = {std::numeric_limits<double>::quiet_NaN(),
                                      std::numeric_limits<double>::infinity(),
                                      -std::numeric_limits<double>::infinity(),
                                      0.1 + 0.2,
                                      1.0 / 3.0,
                                      -0.0,
                                      5e-324,  // the smallest denormal
                                      1.7976931348623157e308,
                                      2.2250738585072014e-308,
                                      123456789.123456789};

// A run with every awkward value, `points` points over three keys, events and checkpoints.
std::int64_t write_awkward_run(Store& store, int points) {
  RunRecord record;
  record.experiment = "wire";
  record.name = "awkward \"quoted\" ✓";
  record.family = "tokenformer";
  record.config = "[model]\nd_model = 16 # comment\n\n[train]\nlr = 3e-4\n";
  record.seed = 7;
  record.parameters = 12345;
  record.inherited_flops = 0.1 + 0.2;
  record.growth_options = "{ \"new_tokens\" :  64 }";
  const std::int64_t id = store.run_create(record);
  store.run_set_progress(id, 987654321, 1.0 / 3.0 * 1e18);
  std::vector<MetricPoint> batch;
  for (int i = 0; i < points; ++i) {
    const char* key = i % 3 == 0 ? "train/loss" : i % 3 == 1 ? "train/lr" : "val/loss";
    batch.push_back({id, key, i / 3 + 1, (i / 3 + 1) * 4096, (i + 1) * 1e9 / 7.0, i * 0.001 + 1e-9,
                     kAwkward[static_cast<std::size_t>(i) % kAwkward.size()] * (i % 2 ? 1.0 : -1.0)});
  }
  store.metrics_insert(batch);
  store.event_add({id, 3, "growth", "{\"from\":  1, \"to\": [2, 3], \"note\": \"é\\n\"}", 0.25});
  store.event_add({id, 5, "nan", "not JSON at all {", 1.0 / 3.0});
  store.event_add({id, 9, "evaluation", "{}", 1e-300});
  store.checkpoint_add({id, 100, 4096, store.home() + "/runs/wire/ckpt/step-00000100.pt", "abc123"});
  store.checkpoint_add({id, 200, 8192, "/elsewhere/step-00000200.pt", "def456"});
  store.run_finish(id, RunStatus::finished, "{\"val/loss\":  3.25, \"bits\" : [1, 2.5e-7]}");
  return id;
}

TEST(RunSource, RemoteYieldsExactlyTheLocalRecordsPointsAndEvents) {
  const std::string home = fresh_home("run-source");
  // Real runs: a two-stage lineage with a growth event and checkpoints, and a baseline.
  test::Result run = test::capture(TFW_BINARY " run " TFW_SOURCE_DIR "/tests/data/tiny-experiment.toml --home " + home);
  ASSERT_EQ(run.code, 0) << run.output;
  constexpr int kPoints = 15000;  // about 1.5 MB of points: at least three pages
  std::int64_t awkward = 0;
  {
    auto store = Store::open(home + "/runs.db");
    awkward = write_awkward_run(*store, kPoints);
  }
  ServeProcess service = serve(home);
  ASSERT_FALSE(service.address().empty()) << service.first_line();

  LocalRunSource local(home);
  service::RemoteRunSource remote(service.address(), "");
  ASSERT_TRUE(remote.exists());
  EXPECT_EQ(remote.home(), fs::canonical(home).string());
  EXPECT_EQ(remote.describe(), "service " + service.address());

  const std::vector<RunRecord> runs = local.runs(), remote_runs = remote.runs();
  ASSERT_EQ(runs.size(), 4u);
  ASSERT_EQ(remote_runs.size(), runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) expect_same(runs[i], remote_runs[i]);
  EXPECT_EQ(runs[1].name, "grown");
  EXPECT_EQ(runs[1].parent, runs[0].id);  // the lineage came across

  std::size_t compared = 0, events = 0;
  std::map<std::int64_t, std::pair<RunCursor, RunCursor>> cursors;
  for (const RunRecord& record : runs) {
    SCOPED_TRACE(record.name);
    std::optional<RunRecord> one = remote.run(record.id);
    ASSERT_TRUE(one.has_value());
    expect_same(record, *one);
    auto& [local_cursor, remote_cursor] = cursors[record.id];
    const RunNews expected = local.news(record.id, local_cursor), got = remote.news(record.id, remote_cursor);
    EXPECT_FALSE(expected.empty());
    compared += expect_same(expected, got);
    events += expected.events.size();
    expect_same(local_cursor, remote_cursor);
    expect_same(local.checkpoints(record.id), remote.checkpoints(record.id));
  }
  EXPECT_GE(compared, static_cast<std::size_t>(kPoints) + 50);
  EXPECT_GE(events, 4u);  // the awkward run's three and the grown run's growth event
  EXPECT_FALSE(remote.run(9999).has_value());
  EXPECT_FALSE(local.run(9999).has_value());

  // The service paged the awkward run: one request returns part of it, and says there is more.
  {
    service::Client client(service.address());
    const json page = client.request({{"type", "history"}, {"run", awkward}});
    EXPECT_TRUE(page["more"].get<bool>());
    EXPECT_GT(page["points"].size(), 1000u);
    EXPECT_LT(page["points"].size(), static_cast<std::size_t>(kPoints) / 2);
    EXPECT_LT(page.dump().size(), service::kMaxLine);
  }

  // Incrementally: more points and an event arrive; both sources read exactly those.
  {
    auto store = Store::open(home + "/runs.db");
    std::vector<MetricPoint> more;
    for (int step = 5001; step <= 5040; ++step)
      more.push_back({awkward, "train/loss", step, step * 4096, 1e12, 0.5, 1.0 / step});
    more.push_back({awkward, "new/key", 1, 4096, 0, 0, std::numeric_limits<double>::quiet_NaN()});
    store->metrics_insert(more);
    store->event_add({awkward, 5040, "evaluation", "{\"val/loss\": 2.5}", 9.0});
  }
  auto& [local_cursor, remote_cursor] = cursors[awkward];
  const RunNews expected = local.news(awkward, local_cursor), got = remote.news(awkward, remote_cursor);
  EXPECT_EQ(expected.points.size(), 41u);
  EXPECT_EQ(expected.events.size(), 1u);
  expect_same(expected, got);
  expect_same(local_cursor, remote_cursor);
  EXPECT_TRUE(remote.news(awkward, remote_cursor).empty());  // nothing seen twice

  // The service going away is an error naming it; a new service is found again.
  service.stop();
  EXPECT_THROW(remote.runs(), Error);
}

TEST(RunSource, AHomeWithoutAStoreAndBadReadRequests) {
  // A home without runs.db: no runs, and the history of a run is a clear error.
  LocalRunSource nothing(fresh_home("run-source-nothing"));
  EXPECT_FALSE(nothing.exists());
  EXPECT_TRUE(nothing.runs().empty());
  EXPECT_FALSE(nothing.run(1).has_value());
  RunCursor cursor;
  try {
    nothing.news(1, cursor);
    ADD_FAILURE() << "no error for a store that is not there";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no run store"), std::string::npos) << e.what();
  }

  const std::string home = fresh_home("run-source-empty");
  ServeProcess service = serve(home);
  ASSERT_FALSE(service.address().empty()) << service.first_line();
  service::RemoteRunSource remote(service.address(), "");
  EXPECT_TRUE(remote.exists());  // the service answered; it has no runs yet
  EXPECT_TRUE(remote.runs().empty());
  EXPECT_FALSE(remote.run(1).has_value());
  try {
    remote.news(1, cursor);
    ADD_FAILURE() << "no error for the history of a run that is not there";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no run 1 in the store"), std::string::npos) << e.what();
  }

  // A well-formed request about a run that does not exist: an error, and the connection stays.
  test::Result run = test::capture(TFW_BINARY " train " TFW_SOURCE_DIR
                                              "/experiments/mini/tiny-tokenformer.toml "
                                              "--set train.max_steps=4 --home " +
                                   home);
  ASSERT_EQ(run.code, 0) << run.output;
  service::Client client(service.address());
  try {
    client.request({{"type", "history"}, {"run", 42}});
    ADD_FAILURE() << "no error for run 42";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no run 42"), std::string::npos) << e.what();
  }
  EXPECT_EQ(client.request({{"type", "checkpoints"}, {"run", 42}})["checkpoints"].size(), 0u);
  EXPECT_EQ(client.request({{"type", "runs"}})["runs"].size(), 1u);
  EXPECT_EQ(remote.runs().size(), 1u);

  // Malformed requests: a fatal error that names the field, and the connection closes.
  const std::vector<std::pair<json, std::string>> malformed = {
      {{{"type", "history"}}, "history needs \"run\""},
      {{{"type", "history"}, {"run", "one"}}, "history needs \"run\""},
      {{{"type", "checkpoints"}, {"run", 1.5}}, "checkpoints needs \"run\""},
      {{{"type", "history"}, {"run", 1}, {"cursor", "x"}}, "\"cursor\""},
      {{{"type", "history"}, {"run", 1}, {"cursor", {{"last_event", 0}, {"last_step", {{"k", "x"}}}}}}, "last_step"},
  };
  for (const auto& [message, expected] : malformed) {
    service::Client bad(service.address());
    bad.send(message);
    const json reply = bad.receive(10);
    EXPECT_EQ(reply["type"], "error") << message.dump();
    EXPECT_TRUE(reply["fatal"].get<bool>()) << message.dump();
    EXPECT_NE(reply["error"].get<std::string>().find(expected), std::string::npos) << reply.dump();
    EXPECT_THROW(bad.receive(10), Error) << message.dump();  // closed
  }
  EXPECT_EQ(remote.runs().size(), 1u);  // and the service keeps serving
}

}  // namespace
}  // namespace tfw
