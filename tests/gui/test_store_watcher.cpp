// The GUI's store watcher (workbench/gui/store_watcher.h) on real SQLite stores: it reads a
// run's series incrementally as a MetricWriter commits them (exact values, in step order);
// an older snapshot keeps the series it had; unwatched runs carry no series; a missing store
// is "no store yet", a store of a newer schema is an error message, never a crash, and the
// file is left as it was; the polling thread publishes new points by itself, also from a
// remote service's socket.

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "storage/store.h"
#include "tests/gui/store_files.h"
#include "workbench/gui/store_watcher.h"
#include "workbench/service/remote_source.h"
#include "workbench/service/serve_process.h"

namespace tfw::gui {
namespace {

namespace fs = std::filesystem;

// The lineage's tokens before a run (the cumulative-tokens axis), computed by hand: A is a root
// whose tokens per FLOP changed (an online growth), B was grown from A's end, C from B's middle
// (B's points not in the snapshot: its overall tokens per FLOP), D and E from inside A.
TEST(InheritedTokens, ReadsEachAncestorsTokensAtTheGrowthPoint) {
  StoreSnapshot snapshot;
  const auto run = [](std::int64_t id, std::int64_t parent, std::int64_t tokens, double flops, double inherited) {
    RunRecord r;
    r.id = id, r.parent = parent, r.tokens = tokens, r.flops = flops, r.inherited_flops = inherited;
    return r;
  };
  snapshot.runs = {run(1, 0, 1000, 100, 0), run(2, 1, 300, 50, 100), run(3, 2, 0, 0, 125), run(4, 1, 0, 0, 40),
                   run(5, 1, 0, 0, 10),     run(6, 99, 0, 0, 10),    run(7, 0, 5, 5, -1)};
  auto a = std::make_shared<RunData>();
  auto series = std::make_shared<Series>();
  series->flops = {20, 60, 100};
  series->tokens = {200, 400, 1000};
  a->metrics["train/loss"] = series;
  snapshot.data[1] = a;
  EXPECT_DOUBLE_EQ(inherited_tokens(snapshot, snapshot.runs[0]), 0);                       // a root
  EXPECT_DOUBLE_EQ(inherited_tokens(snapshot, snapshot.runs[1]), 1000);                    // A's end: its tokens
  EXPECT_DOUBLE_EQ(inherited_tokens(snapshot, snapshot.runs[2]), 1000 + 300.0 * 25 / 50);  // + B at 25 of its 50 FLOPs
  EXPECT_DOUBLE_EQ(inherited_tokens(snapshot, snapshot.runs[3]), 300);    // A at 40: between (20, 200) and (60, 400)
  EXPECT_DOUBLE_EQ(inherited_tokens(snapshot, snapshot.runs[4]), 100);    // A at 10: between its start and (20, 200)
  EXPECT_TRUE(std::isnan(inherited_tokens(snapshot, snapshot.runs[5])));  // its parent is not in the snapshot
  EXPECT_DOUBLE_EQ(inherited_tokens(snapshot, snapshot.runs[6]), 0);
  EXPECT_EQ(with_ancestors(snapshot, {3, 4}), (std::set<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(with_ancestors(snapshot, {7}), (std::set<std::int64_t>{7}));
}

std::string fresh_home(const std::string& name) {
  const std::string home = "/tmp/tfw-test-watcher-" + name;
  fs::remove_all(home);
  fs::create_directories(home);
  return home;
}

std::int64_t add_run(Store& store, const std::string& name) {
  RunRecord run;
  run.name = name;
  run.family = "tokenformer";
  return store.run_create(run);
}

void push(MetricWriter& writer, std::int64_t run, const std::string& key, std::int64_t from, std::int64_t to) {
  for (std::int64_t step = from; step < to; ++step) {
    writer.push({run, key, step, step * 64, step * 1e9, step * 0.5, 1.0 / static_cast<double>(step + 1)});
  }
  writer.flush();
}

TEST(StoreWatcher, ReadsWatchedRunsIncrementallyWithExactValues) {
  const std::string home = fresh_home("incremental");
  auto store = Store::open(home + "/runs.db");
  const std::int64_t a = add_run(*store, "a"), b = add_run(*store, "b");
  MetricWriter writer(home + "/runs.db");
  push(writer, a, "train/loss", 0, 100);
  push(writer, b, "train/loss", 0, 10);

  StoreWatcher watcher(home, 0);
  watcher.watch({a});
  std::shared_ptr<const StoreSnapshot> first = watcher.poll();
  EXPECT_TRUE(first->exists);
  EXPECT_EQ(first->error, "");
  ASSERT_EQ(first->runs.size(), 2u);
  ASSERT_EQ(first->data.count(a), 1u);
  EXPECT_EQ(first->data.count(b), 0u);  // not watched
  const Series* series = first->data.at(a)->series("train/loss");
  ASSERT_NE(series, nullptr);
  ASSERT_EQ(series->value.size(), 100u);
  for (std::size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(series->step[i], static_cast<double>(i));
    ASSERT_EQ(series->tokens[i], static_cast<double>(i * 64));
    ASSERT_EQ(series->flops[i], i * 1e9);
    ASSERT_EQ(series->value[i], 1.0 / static_cast<double>(i + 1));
  }

  push(writer, a, "train/loss", 100, 150);
  push(writer, a, "val/loss", 0, 3);
  std::shared_ptr<const StoreSnapshot> second = watcher.poll();
  EXPECT_GT(second->generation, first->generation);
  const Series* grown = second->data.at(a)->series("train/loss");
  ASSERT_EQ(grown->value.size(), 150u);
  EXPECT_EQ(grown->value[149], 1.0 / 150.0);
  EXPECT_EQ(second->data.at(a)->series("val/loss")->value.size(), 3u);
  EXPECT_EQ(series->value.size(), 100u);  // the first snapshot still holds what it had

  // Nothing new: the same series objects are shared, the generation stays.
  std::shared_ptr<const StoreSnapshot> third = watcher.poll();
  EXPECT_EQ(third->data.at(a)->series("train/loss"), grown);
  EXPECT_EQ(third->generation, second->generation);

  watcher.watch({a, b});
  EXPECT_EQ(watcher.poll()->data.at(b)->series("train/loss")->value.size(), 10u);
}

TEST(StoreWatcher, TheThreadPublishesNewPointsByItself) {
  const std::string home = fresh_home("thread");
  auto store = Store::open(home + "/runs.db");
  const std::int64_t a = add_run(*store, "live");
  MetricWriter writer(home + "/runs.db");
  StoreWatcher watcher(home, 0.05);
  watcher.watch({a});
  push(writer, a, "train/loss", 0, 20);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::size_t seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    auto snapshot = watcher.snapshot();
    auto found = snapshot->data.find(a);
    if (found != snapshot->data.end() && found->second->series("train/loss")) {
      seen = found->second->series("train/loss")->value.size();
      if (seen == 20) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(seen, 20u);
}

// The same watcher on a remote source (`tfw gui --connect`): a live run's points, events and
// status arrive through a real `tfw serve`, with the values the store holds; a service that
// goes away is an error state, not a crash.
TEST(StoreWatcher, ARemoteServicesLiveRunArrivesThroughItsSocket) {
  const std::string home = fresh_home("remote");
  auto store = Store::open(home + "/runs.db");
  const std::int64_t a = add_run(*store, "live");
  service::ServeProcess service(TFW_BINARY, {"--listen", "127.0.0.1:0", "--home", home});
  ASSERT_FALSE(service.address().empty()) << service.first_line();
  StoreWatcher watcher(std::make_unique<service::RemoteRunSource>(service.address(), ""), 0.05);
  watcher.watch({a});
  MetricWriter writer(home + "/runs.db");
  auto wait_until = [&](auto done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline && !done(*watcher.snapshot())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done(*watcher.snapshot());
  };
  auto points = [&](const StoreSnapshot& snapshot) -> std::size_t {
    auto found = snapshot.data.find(a);
    if (found == snapshot.data.end() || !found->second->series("train/loss")) return 0;
    return found->second->series("train/loss")->value.size();
  };
  push(writer, a, "train/loss", 0, 20);
  ASSERT_TRUE(wait_until([&](const StoreSnapshot& s) { return points(s) == 20; }));
  push(writer, a, "train/loss", 20, 50);
  store->event_add({a, 30, "growth", "{\"to\": 64}", 1.5});
  store->run_finish(a, RunStatus::finished, "{}");
  ASSERT_TRUE(wait_until([&](const StoreSnapshot& s) {
    return points(s) == 50 && s.runs.size() == 1 && s.runs[0].status == RunStatus::finished;
  }));
  auto snapshot = watcher.snapshot();
  EXPECT_TRUE(snapshot->remote);
  EXPECT_EQ(snapshot->source, "service " + service.address());
  const RunData& data = *snapshot->data.at(a);
  for (int step = 0; step < 50; ++step) {
    ASSERT_EQ(data.series("train/loss")->step[step], step);
    ASSERT_EQ(data.series("train/loss")->value[step], 1.0 / static_cast<double>(step + 1));  // exact
  }
  ASSERT_EQ(data.events.size(), 1u);
  EXPECT_EQ(data.events[0].payload, "{\"to\": 64}");

  service.stop();
  EXPECT_TRUE(wait_until([&](const StoreSnapshot& s) { return !s.error.empty(); }));
  // "closed the connection" while a request was under way, then "cannot reach" at the next poll.
  EXPECT_NE(watcher.snapshot()->error.find("the service at " + service.address()), std::string::npos)
      << watcher.snapshot()->error;
}

TEST(StoreWatcher, MissingAndNewerStoresAreStatesNotCrashes) {
  const std::string empty = fresh_home("missing");
  StoreWatcher none(empty, 0);
  auto snapshot = none.poll();
  EXPECT_FALSE(snapshot->exists);
  EXPECT_EQ(snapshot->error, "");
  EXPECT_TRUE(snapshot->runs.empty());
  EXPECT_FALSE(fs::exists(empty + "/runs.db"));  // a reader never creates the store

  const std::string home = fresh_home("newer");
  Store::open(home + "/runs.db").reset();
  test::mark_newer_schema(home + "/runs.db");
  auto read = [&] { return test::file_bytes(home + "/runs.db"); };
  const std::string before = read();
  StoreWatcher watcher(home, 0);
  snapshot = watcher.poll();
  EXPECT_NE(snapshot->error.find("99"), std::string::npos) << snapshot->error;
  EXPECT_NE(snapshot->error.find("newer"), std::string::npos) << snapshot->error;
  EXPECT_EQ(read(), before);
}

}  // namespace
}  // namespace tfw::gui
