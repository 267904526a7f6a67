// The run store against real SQLite files and real processes: migrations, a newer schema,
// wrong files left untouched, 8 concurrent writer processes, a writer killed with SIGKILL,
// crash detection by heartbeat, lineage budgets. Links only tfw_storage: no torch.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "storage/run_columns.h"
#include "storage/store.h"
#include "tests/schema_columns.h"
#include "tests/scratch.h"

namespace tfw {
namespace {

namespace fs = std::filesystem;

std::string fresh_store(const std::string& name) { return test::fresh_store("store-" + name); }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

RunRecord run_named(const std::string& name, std::int64_t parent = 0) {
  RunRecord run;
  run.name = name;
  run.family = "tokenformer";
  run.config = "[model]\nd = 8\n";
  run.parent = parent;
  return run;
}

TEST(StoreMigration, FromAnEmptyFileAndEveryEarlierVersion) {
  std::string empty = fresh_store("empty");
  std::ofstream(empty).close();  // a 0-byte file
  EXPECT_EQ(Store::open(empty)->schema_version(), kStoreSchemaVersion);
  for (int version = 0; version < kStoreSchemaVersion; ++version) {
    SCOPED_TRACE(version);
    std::string path = fresh_store("v" + std::to_string(version));
    store_create_at_version(path, version);
    auto store = Store::open(path);
    EXPECT_EQ(store->schema_version(), kStoreSchemaVersion);
    std::int64_t id = store->run_create(run_named("after-migration"));
    EXPECT_EQ(store->run_get(id)->name, "after-migration");
    EXPECT_TRUE(store->integrity_ok());
    // A reader (tfw runs, the GUI) of an older store migrates it too, then reads it.
    std::string read_path = fresh_store("read-v" + std::to_string(version));
    store_create_at_version(read_path, version);
    EXPECT_EQ(Store::open_readonly(read_path)->schema_version(), kStoreSchemaVersion);
  }
  // v1 -> v2 keeps every run: the jobs table is added beside them (the service's job queue
  // on a migrated store: tests/service/test_job_queue.cpp).
  std::string v1 = fresh_store("keep-v1");
  store_create_at_version(v1, 1);
  Store::open(v1)->run_create(run_named("kept"));  // migrates, then adds a run
  EXPECT_EQ(Store::open_readonly(v1)->runs().size(), 1u);
}

TEST(StoreMigration, ANewerSchemaIsRefused) {
  std::string path = fresh_store("newer");
  store_create_at_version(path, kStoreSchemaVersion);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  for (bool readonly : {false, true}) {
    try {
      if (readonly)
        Store::open_readonly(path);
      else
        Store::open(path);
      FAIL() << "expected a StoreError";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("has schema version 99, this tfw knows up to " +
                                           std::to_string(kStoreSchemaVersion)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(StoreOpen, NonSqliteAndCorruptFilesAreRefusedAndLeftUntouched) {
  std::string text = fresh_store("text");
  std::ofstream(text) << "these are my notes, not a database\n";
  std::string corrupt = fresh_store("corrupt");
  {
    std::ofstream out(corrupt, std::ios::binary);
    out.write("SQLite format 3\0", 16);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 7919) & 0xff));
  }
  for (const std::string& path : {text, corrupt}) {
    SCOPED_TRACE(path);
    const std::string before = read_bytes(path);
    EXPECT_THROW(Store::open(path), StoreError);
    EXPECT_THROW(Store::open_readonly(path), StoreError);
    EXPECT_EQ(read_bytes(path), before);
    EXPECT_FALSE(fs::exists(path + "-wal"));
  }
  try {
    Store::open(text);
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a tfw store (not an SQLite file); it was left untouched"),
              std::string::npos);
  }
}

// Issue 13: a process that held a connection and opened the store again (every CLI command,
// the service's handlers, the GUI's watcher do) used to peek at the header with an ifstream.
// Closing that descriptor dropped the process's fcntl locks on runs.db, so another process
// that then closed its connection believed it was the last one, checkpointed and deleted the
// WAL under the first: the store was then "malformed". Here the other process is the sqlite3
// command-line shell, a real separate process; the WAL must survive it every round.
TEST(StoreOpen, OpeningAgainInAProcessThatHoldsAConnectionKeepsItsLocks) {
  const std::string path = fresh_store("reopen");
  auto held = Store::open(path);
  held->run_create(run_named("first"));
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    Store::open_readonly(path).reset();
    Store::open(path).reset();
    const std::string command = "sqlite3 " + path + " \"INSERT INTO experiments (name, created) VALUES ('other-" +
                                std::to_string(round) + "', 0)\"";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    EXPECT_TRUE(fs::exists(path + "-wal")) << "another process deleted the WAL of a live connection";
    held->run_create(run_named("after-" + std::to_string(round)));
  }
  held.reset();
  auto check = Store::open_readonly(path);
  EXPECT_TRUE(check->integrity_ok());
  EXPECT_EQ(check->runs().size(), 6u);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* count = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM experiments WHERE name LIKE 'other-%'", -1, &count, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(count), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(count, 0), 5);
  sqlite3_finalize(count);
  sqlite3_close(db);
}

// A store that SQLite finds damaged is named in the error, with what to do.
TEST(StoreOpen, ADamagedStoreIsNamedWithAHint) {
  const std::string path = fresh_store("damaged");
  {
    auto store = Store::open(path);
    for (int i = 0; i < 200; ++i) store->run_create(run_named("run-" + std::to_string(i)));
  }
  // Every page after the first (which holds the schema) becomes garbage: the tables' b-trees.
  const auto size = fs::file_size(path);
  ASSERT_GT(size, 8192u);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(4096);
    for (std::uintmax_t i = 4096; i < size; ++i) file.put(static_cast<char>((i * 31 + 7) & 0xff));
  }
  try {
    Store::open_readonly(path)->runs();
    FAIL() << "a damaged store was read without an error";
  } catch (const StoreError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("hint: the store file is damaged"), std::string::npos) << what;
  }
}

TEST(StoreRuns, LineageCumulativeFlopsAreTheSumOfTheStages) {
  auto store = Store::open(fresh_store("lineage"));
  std::int64_t a = store->run_create(run_named("stage-0"));
  store->run_set_progress(a, 1000, 1.5e12);
  RunRecord b_record = run_named("stage-1", a);
  b_record.growth_method = "pattention_grow";
  std::int64_t b = store->run_create(b_record);
  store->run_set_progress(b, 500, 2.25e12);
  std::int64_t c = store->run_create(run_named("stage-2", b));
  store->run_set_progress(c, 250, 4.0e12);
  EXPECT_DOUBLE_EQ(store->run_get(a)->cumulative_flops, 1.5e12);
  EXPECT_DOUBLE_EQ(store->run_get(b)->cumulative_flops, 1.5e12 + 2.25e12);
  EXPECT_DOUBLE_EQ(store->run_get(c)->cumulative_flops, 1.5e12 + 2.25e12 + 4.0e12);
  std::vector<RunRecord> chain = store->lineage(c);
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0].name, "stage-0");
  EXPECT_EQ(chain[1].growth_method, "pattention_grow");
  double own = 0;
  for (const RunRecord& r : chain) own += r.flops;
  EXPECT_DOUBLE_EQ(chain.back().cumulative_flops, own);
}

TEST(StoreRuns, FiltersSortsAndFindsByIdOrName) {
  auto store = Store::open(fresh_store("filters"));
  std::int64_t first = store->run_create(run_named("alpha"));
  RunRecord other = run_named("beta");
  other.family = "transformer";
  other.experiment = "e1";
  std::int64_t second = store->run_create(other);
  store->run_set_progress(second, 10, 1.0);
  store->run_finish(first, RunStatus::finished, R"({"val_loss": 1.5})");
  EXPECT_EQ(store->runs({"e1", "", std::nullopt, "id", false}).size(), 1u);
  EXPECT_EQ(store->runs({"", "", RunStatus::finished, "id", false}).size(), 1u);
  EXPECT_EQ(store->runs({"", "transformer", std::nullopt, "id", false}).front().name, "beta");
  EXPECT_EQ(store->runs({"", "", std::nullopt, "tokens", true}).front().name, "beta");
  EXPECT_THROW(store->runs({"", "", std::nullopt, "colour", false}), StoreError);
  EXPECT_EQ(store->run_find(std::to_string(first))->name, "alpha");
  EXPECT_EQ(store->run_find("beta")->id, second);
  EXPECT_FALSE(store->run_find("gamma").has_value());
  EXPECT_THROW(store->run_create(run_named("alpha")), StoreError);  // same name, same experiment
}

// The evaluations' columns are declared once (storage/evaluations.cpp): the list is the
// schema's, and a row reads back as it was written, with a run the store does not know (0)
// and a metric without a value (NaN) stored as NULL, and a row without a time given the
// store's.
TEST(StoreEvaluations, TheOneListOfColumnsIsTheSchemasAndEveryFieldRoundTrips) {
  const std::string path = fresh_store("evaluation-columns");
  auto store = Store::open(path);
  EXPECT_EQ(Store::evaluation_columns(), test::schema_columns(path, "evaluations"));
  EXPECT_EQ(Store::evaluation_columns().size(), 12u);

  const std::int64_t run = store->run_create(run_named("evaluated"));
  EvaluationRow known;
  known.run = run;
  known.checkpoint = "/abs/step-40.safetensors";
  known.step = 40;
  known.corpus = "kjv";
  known.metric = "loss";
  known.value = 2.375;
  known.windows = 12;
  known.tokens = 3072;
  known.mode = "stride:128";
  known.created = 1700000000.5;
  known.blocks = "gcide+shared";
  EvaluationRow unknown = known;
  unknown.run = 0;
  unknown.metric = "cloze_accuracy";
  unknown.value = std::nan("");
  unknown.created = 0;
  unknown.blocks = "";
  const double before = store_now();
  store->evaluations_add({known, unknown});

  const std::vector<EvaluationRow> back = store->evaluations(0);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_GT(back[0].id, 0);
  EXPECT_EQ(back[1].id, back[0].id + 1);
  EXPECT_EQ(back[0].run, run);
  EXPECT_EQ(back[0].checkpoint, known.checkpoint);
  EXPECT_EQ(back[0].step, 40);
  EXPECT_EQ(back[0].corpus, "kjv");
  EXPECT_EQ(back[0].metric, "loss");
  EXPECT_EQ(back[0].value, 2.375);
  EXPECT_EQ(back[0].windows, 12);
  EXPECT_EQ(back[0].tokens, 3072);
  EXPECT_EQ(back[0].mode, "stride:128");
  EXPECT_EQ(back[0].created, 1700000000.5);
  EXPECT_EQ(back[0].blocks, "gcide+shared");
  EXPECT_EQ(back[1].run, 0);
  EXPECT_EQ(back[1].metric, "cloze_accuracy");
  EXPECT_TRUE(std::isnan(back[1].value));
  EXPECT_GE(back[1].created, before);
  EXPECT_EQ(back[1].blocks, "");
  EXPECT_EQ(store->evaluations(run).size(), 1u);  // the unknown run's row is not this run's
}

// The runs table's columns are declared once (storage/run_columns.h): the list is the schema's
// own columns after id and experiment_id, in order, and every field a run is written with comes
// back as it was.
TEST(StoreRuns, TheOneListOfColumnsIsTheSchemasAndEveryFieldRoundTrips) {
  const std::string path = fresh_store("columns");
  auto store = Store::open(path);
  const std::vector<std::string> schema = test::schema_columns(path, "runs");
  ASSERT_FALSE(schema.empty());
  std::vector<std::string> listed = {"id", "experiment_id"};
  for (const detail::RunColumn& column : detail::kRunColumns) listed.emplace_back(column.name);
  EXPECT_EQ(schema, listed);

  const std::int64_t parent = store->run_create(run_named("parent"));
  RunRecord run;
  run.experiment = "e-columns";
  run.name = "every-field";
  run.family = "transformer";
  run.config = "[model]\nd = 16\n";
  run.status = RunStatus::finished;
  run.heartbeat = 1700000001.25;
  run.seed = 41;
  run.git_commit = "0123abcd";
  run.host = "node-7";
  run.started = 1700000000.5;
  run.ended = 1700000100.75;
  run.parent = parent;
  run.growth_method = "pattention_grow";
  run.growth_options = R"({"init":"zero"})";
  run.stage = 2;
  run.parameters = 123456;
  run.tokens = 65536;
  run.flops = 3.5e12;
  run.inherited_flops = 1.25e12;
  run.cumulative_flops = 4.75e12;
  run.final_metrics = FinalMetrics::from_text(R"({"val_loss":2.5})");
  run.error = "none at all";
  run.run_dir = fs::path(path).parent_path().string() + "/runs/every-field";
  const std::optional<RunRecord> back = store->run_get(store->run_insert(run));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->experiment, run.experiment);
  EXPECT_EQ(back->name, run.name);
  EXPECT_EQ(back->family, run.family);
  EXPECT_EQ(back->config, run.config);
  EXPECT_EQ(back->status, run.status);
  EXPECT_EQ(back->heartbeat, run.heartbeat);
  EXPECT_EQ(back->seed, run.seed);
  EXPECT_EQ(back->git_commit, run.git_commit);
  EXPECT_EQ(back->host, run.host);
  EXPECT_EQ(back->started, run.started);
  EXPECT_EQ(back->ended, run.ended);
  EXPECT_EQ(back->parent, run.parent);
  EXPECT_EQ(back->growth_method, run.growth_method);
  EXPECT_EQ(back->growth_options, run.growth_options);
  EXPECT_EQ(back->stage, run.stage);
  EXPECT_EQ(back->parameters, run.parameters);
  EXPECT_EQ(back->tokens, run.tokens);
  EXPECT_EQ(back->flops, run.flops);
  EXPECT_EQ(back->inherited_flops, run.inherited_flops);
  EXPECT_EQ(back->cumulative_flops, run.cumulative_flops);
  EXPECT_EQ(back->final_metrics.text(), run.final_metrics.text());
  EXPECT_EQ(back->error, run.error);
  EXPECT_EQ(back->run_dir, run.run_dir);
  // A new run starts with no end and no parent (0 when read).
  const std::int64_t fresh = store->run_create(run_named("fresh"));
  EXPECT_EQ(store->run_get(fresh)->ended, 0);
  EXPECT_EQ(store->run_get(fresh)->parent, 0);
}

// Child process body: a writer that creates run `name` and pushes `points` metric points.
int write_points(const std::string& path, const std::string& name, int points) {
  try {
    auto store = Store::open(path);
    std::int64_t run = store->run_create(run_named(name));
    MetricWriter writer(path);
    for (int i = 0; i < points; ++i) writer.push({run, i % 2 ? "train/loss" : "train/lr", i / 2, i, 1.0 * i, 0.1, 0.5});
    writer.flush();
    return writer.committed() == points ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child %s: %s\n", name.c_str(), e.what());
    return 2;
  }
}

TEST(StoreConcurrency, EightProcessesWriteTogetherAndNothingIsLost) {
  const std::string path = fresh_store("eight");
  const int processes = 8, points = 20000;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    pid_t pid = fork();
    if (pid == 0) _exit(write_points(path, "writer-" + std::to_string(p), points));
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid << " status " << status;
  }
  auto store = Store::open_readonly(path);
  std::vector<RunRecord> runs = store->runs();
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(processes));
  for (const RunRecord& run : runs) EXPECT_EQ(store->metrics_count(run.id), points) << run.name;
  EXPECT_TRUE(store->integrity_ok());
}

TEST(StoreCrash, SigkillMidBatchKeepsCommittedPointsAndTheRunShowsCrashed) {
  const std::string path = fresh_store("sigkill");
  const std::string progress = path + ".committed";
  pid_t pid = fork();
  if (pid == 0) {
    auto store = Store::open(path);
    std::int64_t run = store->run_create(run_named("doomed"));
    MetricWriter writer(path);
    writer.heartbeat_add(run);
    for (int i = 0;; ++i) {
      writer.push({run, "train/loss", i, i, 1.0 * i, 0.0, 1.0 / (1 + i)});
      if (i % 5000 == 4999) {  // commit, then say how many are safe
        writer.flush();
        std::ofstream(progress) << writer.committed() << "\n";
      }
    }
  }
  // Let it commit a few batches, then kill it in the middle of the next ones.
  std::int64_t safe = 0;
  for (int tries = 0; tries < 600 && safe < 20000; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(progress);
    in >> safe;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::ifstream in(progress);
  in >> safe;
  ASSERT_GE(safe, 20000);

  auto store = Store::open(path);
  EXPECT_TRUE(store->integrity_ok());
  std::optional<RunRecord> run = store->run_find("doomed");
  ASSERT_TRUE(run.has_value());
  EXPECT_GE(store->metrics_count(run->id), safe);
  setenv("TFW_HEARTBEAT_TIMEOUT", "1", 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(store->run_get(run->id)->status, RunStatus::crashed);
  EXPECT_EQ(store->runs({"", "", RunStatus::crashed, "id", false}).size(), 1u);
  // Resume continues the same run: running again, more points on the same id.
  store->run_set_status(run->id, RunStatus::running);
  EXPECT_EQ(store->run_get(run->id)->status, RunStatus::running);
  const std::int64_t before = store->metrics_count(run->id);
  {
    MetricWriter writer(path);
    writer.push({run->id, "train/loss", 10000000, 0, 0.0, 0.0, 0.5});
  }
  EXPECT_EQ(store->metrics_count(run->id), before + 1);
  unsetenv("TFW_HEARTBEAT_TIMEOUT");
}

TEST(StoreWriter, ABoundedQueueMakesPushWaitInsteadOfDropping) {
  const std::string path = fresh_store("bounded");
  auto store = Store::open(path);
  std::int64_t run = store->run_create(run_named("small-queue"));
  {
    MetricWriter writer(path, /*capacity=*/16);
    for (int i = 0; i < 10000; ++i) writer.push({run, "k", i, i, 0.0, 0.0, 1.0});
  }  // the destructor commits what is left
  EXPECT_EQ(store->metrics_count(run), 10000);
}

}  // namespace
// Every status maps to one name and back; the names are the ones the schema's CHECK allows
// (a run stored with each status reads back as it). The jobs' statuses:
// tests/service/test_job_queue.cpp.
TEST(Statuses, EveryNameRoundTripsThroughTheStore) {
  for (RunStatus status : {RunStatus::queued, RunStatus::running, RunStatus::finished, RunStatus::failed,
                           RunStatus::killed, RunStatus::crashed}) {
    EXPECT_EQ(run_status_parse(status_name(status)), status);
  }
  EXPECT_EQ(run_status_parse("cancelled"), std::nullopt);  // a job status, not a run's
  EXPECT_EQ(run_status_parse("Finished"), std::nullopt);
  EXPECT_EQ(run_status_choices(), "queued, running, finished, failed, killed or crashed");
  EXPECT_FALSE(status_final(RunStatus::running));
  EXPECT_TRUE(status_final(RunStatus::crashed));

  auto store = Store::open(fresh_store("statuses"));
  for (RunStatus status : {RunStatus::queued, RunStatus::finished, RunStatus::failed, RunStatus::killed}) {
    RunRecord record = run_named(std::string("r-") + status_name(status));
    const std::int64_t id = store->run_create(record);
    store->run_finish(id, status, "{}");
    EXPECT_EQ(store->run_get(id)->status, status) << status_name(status);
  }
}

}  // namespace tfw
