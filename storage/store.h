// The run store: every run, its metrics, checkpoints, events, evaluations, lineage and compute
// budget in one SQLite file (TFW_HOME/runs.db). Schema versioned with PRAGMA user_version and
// forward migrations run under a file lock; WAL, busy_timeout, synchronous=NORMAL. Writers:
// one MetricWriter per process batches points in transactions on its own thread and
// connection; readers open read-only. The schema also holds the tables of other layers, which
// work on the store's connection (connection()) with their own classes: the engine service's
// job queue (workbench/service/job_queue.h) and the runs submitted to a cluster scheduler
// (runner/cluster_jobs.h). Never includes torch (docs/design/ARCHITECTURE.md).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "storage/final_metrics.h"
#include "storage/status.h"

struct sqlite3;

namespace tfw {

inline constexpr int kStoreSchemaVersion = 7;

// A store that cannot be opened or used: not SQLite, corrupt, a newer schema, locked out.
// The store could not do what was asked (no store, a newer schema, a name taken, SQLite's
// error). An Error like the engine's, with a hint line (with_hint); the CLI exits with 2.
class StoreError : public Error {
 public:
  explicit StoreError(const std::string& what) : Error(what) {}
};

struct RunRecord {
  std::int64_t id = 0;
  std::string experiment = "default";
  std::string name;
  std::string family;
  std::string config;                     // the resolved run config (TOML)
  RunStatus status = RunStatus::running;  // crashed: derived, a running run whose heartbeat is stale
  double heartbeat = 0;                   // unix seconds
  std::int64_t seed = 0;
  std::string git_commit, host;
  double started = 0, ended = 0;
  std::int64_t parent = 0;  // 0: none
  std::string growth_method, growth_options;
  std::int64_t stage = 0;
  std::int64_t parameters = 0;
  std::int64_t tokens = 0;
  double flops = 0;  // this run's own training FLOPs
  // The lineage's FLOPs before this run: the parent's cumulative FLOPs at the checkpoint this
  // run was grown from. -1 in run_create means "the parent's cumulative FLOPs now".
  double inherited_flops = -1;
  double cumulative_flops = 0;  // inherited + own: the lineage's budget
  FinalMetrics final_metrics;   // typed when read; its text as stored
  std::string error;
  std::string run_dir;  // absolute when read (stored relative to the home when inside it)
};

struct MetricPoint {
  std::int64_t run = 0;
  std::string key;
  std::int64_t step = 0, tokens = 0;
  double flops = 0, wall = 0, value = 0;
};

struct CheckpointRow {
  std::int64_t run = 0, step = 0, bytes = 0;
  std::string path, checksum;
};

struct EventRow {
  std::int64_t run = 0, step = 0;
  std::string kind, payload;  // payload: JSON
  double wall = 0;
  std::int64_t id = 0;  // set when read (event_add ignores it)
};

// What an incremental reader (the GUI's store watcher, the service's poller) has seen of a
// run: the last step of each metric key and the last event id.
struct RunCursor {
  std::map<std::string, std::int64_t> last_step;
  std::int64_t last_event = 0;
};

// A run's points and events that a cursor had not seen.
struct RunNews {
  std::vector<MetricPoint> points;  // by key, then step
  std::vector<EventRow> events;     // by id
  bool empty() const { return points.empty() && events.empty(); }
};

// One metric of `tfw eval` (v4): a checkpoint evaluated on a corpus.
struct EvaluationRow {
  std::int64_t id = 0;
  std::int64_t run = 0;                  // the run that wrote the checkpoint (0: one the store does not know)
  std::string checkpoint;                // absolute path
  std::int64_t step = 0;                 // the checkpoint's step
  std::string corpus;                    // its name (a built-in corpus, or a path's file name)
  std::string metric;                    // loss, perplexity, bits_per_token, bits_per_byte, cloze_accuracy, ...
  double value = 0;                      // NaN stored as NULL
  std::int64_t windows = 0, tokens = 0;  // what was evaluated: windows, and target tokens scored
  std::string mode;                      // "even" (evenly spaced windows), "stride:S" or "cloze"
  double created = 0;
  std::string blocks;  // v5: the parameter blocks used ("gcide+shared"); "" for every token
};

struct RunFilter {
  std::string experiment, family;
  std::optional<RunStatus> status;  // any when empty
  std::string sort = "id";          // id, name, started, tokens, flops, cumulative_flops, parameters
  bool descending = false;
};

class Store {
 public:
  // Opens read-write, creating and migrating (under a file lock) when needed.
  static std::unique_ptr<Store> open(const std::string& path);
  // Opens an existing store read-only (GUI, export, `tfw runs`).
  static std::unique_ptr<Store> open_readonly(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int schema_version();
  std::int64_t experiment_ensure(const std::string& name, const std::string& file = "");
  // Inserts a running run (started = heartbeat = now); returns its id.
  std::int64_t run_create(const RunRecord& run);
  void run_set_status(std::int64_t run, RunStatus status, const std::string& error = "");
  // Own tokens and FLOPs so far; the cumulative budget follows (inherited + own).
  void run_set_progress(std::int64_t run, std::int64_t tokens, double flops);
  void run_finish(std::int64_t run, RunStatus status, const std::string& final_metrics, const std::string& error = "");
  void run_heartbeat(std::int64_t run);
  std::optional<RunRecord> run_get(std::int64_t run);
  // By id ("12"), or by name (the newest run of that name).
  std::optional<RunRecord> run_find(const std::string& id_or_name);
  std::vector<RunRecord> runs(const RunFilter& filter = {});
  std::optional<RunRecord> run_in_experiment(const std::string& experiment, const std::string& name);
  std::vector<RunRecord> lineage(std::int64_t run);       // root first, ending with `run`
  std::vector<RunRecord> run_children(std::int64_t run);  // the runs grown from `run`
  // Removes a run's record: its metrics, checkpoint rows, events and the run itself, in one
  // transaction (files are the caller's). Refused while other runs were grown from it.
  void run_delete(std::int64_t run);

  // A resumed run whose config changed (`tfw train --resume --set/--extend`): the stored config
  // becomes `config` in the same transaction as `event`, which records the old and new values.
  void run_set_config(std::int64_t run, const std::string& config, const EventRow& event);

  // Run bundles (runner/bundle.h). `body` runs inside one transaction: committed when it
  // returns, rolled back when it throws.
  void transaction(const std::function<void()>& body);
  // A run exactly as another home recorded it: status, times, heartbeat, lineage (`parent`, an
  // id of this store), inherited and cumulative FLOPs, final metrics, error. Its id. Inside a
  // transaction(); metrics_append and event_add/checkpoint_add then add the rest.
  std::int64_t run_insert(const RunRecord& run);
  void metrics_append(const std::vector<MetricPoint>& points);  // inside the caller's transaction

  void checkpoint_add(const CheckpointRow& row);
  void checkpoint_remove(std::int64_t run, const std::string& path);
  std::vector<CheckpointRow> checkpoints(std::int64_t run);
  // Runs recorded through the engine service (`tfw train --record-to`): a new random
  // capability (32 hex digits from the system's random source) for `run`, stored; and whether
  // `capability` is the one stored for `run` (compared in constant time). A run with no grant
  // (created on this machine) is held by no recording client.
  std::string record_grant(std::int64_t run);
  bool record_granted(std::int64_t run, const std::string& capability);
  // A checkpoint file replaced by another (`tfw checkpoints upgrade`): its checkpoint and
  // evaluation rows name `to` instead of `from` (absolute paths). Returns the rows changed.
  std::int64_t checkpoint_rename(const std::string& from, const std::string& to, const std::string& checksum,
                                 std::int64_t bytes);
  // The run that wrote the checkpoint at `path` (absolute), if the store knows it.
  std::optional<std::int64_t> checkpoint_run(const std::string& path);
  void event_add(const EventRow& row);
  std::vector<EventRow> events(std::int64_t run);
  void metrics_insert(const std::vector<MetricPoint>& points);  // one transaction
  std::vector<MetricPoint> metrics(std::int64_t run, const std::string& key = "");
  // What `cursor` has not seen of `run`; advances the cursor past it.
  RunNews news(std::int64_t run, RunCursor& cursor);
  std::int64_t metrics_count(std::int64_t run);

  // `tfw eval` results (v4), in one transaction; of a run, by id.
  void evaluations_add(const std::vector<EvaluationRow>& rows);
  std::vector<EvaluationRow> evaluations(std::int64_t run);  // run 0: every run's
  static std::vector<std::string> evaluation_columns();      // the table's columns as one list declares them

  bool integrity_ok();
  const std::string& path() const { return path_; }
  // The folder that holds the store (TFW_HOME), absolute. Run folders and checkpoint paths
  // inside it are stored relative to it and read back absolute.
  const std::string& home() const { return home_; }
  // The store's SQLite connection, for the classes that keep their own tables in this store
  // on the same connection (storage/sqlite_statement.h runs statements on it): the service's
  // JobQueue and the runner's ClusterJobs. Owned by the store; valid while it lives.
  sqlite3* connection() { return db_; }

 private:
  Store(sqlite3* db, std::string path, bool readonly);
  void migrate();
  std::string to_stored(const std::string& path) const;
  std::string from_stored(const std::string& path) const;
  RunRecord resolved(RunRecord record) const;
  sqlite3* db_;
  std::string path_;
  std::string home_;
  bool readonly_;
};

// Creates a store at an earlier schema `version` (0 = an SQLite file with no tables), for
// migration tests: opening it with Store::open must migrate it forward.
void store_create_at_version(const std::string& path, int version);

// Seconds after which a running run without a heartbeat is reported as crashed:
// TFW_HEARTBEAT_TIMEOUT, default 30.
double store_heartbeat_timeout();
double store_now();  // unix seconds

// One writer per process: points are queued and committed in batches by a thread with its
// own connection; the queue is bounded and push() waits when it is full (points are never
// dropped). The thread also beats the heartbeat of every run registered with it.
class MetricWriter {
 public:
  explicit MetricWriter(const std::string& path, std::size_t capacity = 1 << 16);
  ~MetricWriter();  // commits everything queued, then stops
  MetricWriter(const MetricWriter&) = delete;
  MetricWriter& operator=(const MetricWriter&) = delete;

  void push(MetricPoint point);
  void flush();  // returns when every point pushed so far is committed
  void heartbeat_add(std::int64_t run);
  void heartbeat_remove(std::int64_t run);
  std::int64_t committed() const;

 private:
  void loop();
  std::unique_ptr<Store> store_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, space_, done_;
  std::deque<MetricPoint> queue_;
  std::set<std::int64_t> heartbeats_;
  std::int64_t pushed_ = 0, committed_ = 0;
  bool stopping_ = false;
  bool flush_requested_ = false;
  std::string error_;
  std::thread thread_;
};

// A capability: 32 hex digits from the system's random source (StoreError if it cannot be
// read), and a comparison of two in constant time that never matches an empty one. The engine
// service gives them for runs it records (record_grant) and for jobs (workbench/service).
std::string capability_new();
bool capability_equal(const std::string& stored, const std::string& given);

}  // namespace tfw
