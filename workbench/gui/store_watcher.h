// Reads runs off the UI thread: a background thread polls a RunSource (the local store
// TFW_HOME/runs.db read-only, or an engine service with `tfw gui --connect`) and publishes
// immutable snapshots: every run, and for the runs the UI asked for, their metric series
// (fetched incrementally), events and checkpoints. The UI thread only swaps a shared_ptr,
// so a training run writing to the store, or a slow network, never stalls a frame.
// ImGui-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runner/run_source.h"
#include "storage/store.h"

namespace tfw::gui {

// One metric of one run, as columns (x candidates and the value), in step order.
struct Series {
  std::vector<double> step, tokens, flops, wall, value;
};

struct RunData {
  RunRecord record;
  // By key (train/loss, val/loss, ...); a series is shared between snapshots until it grows.
  std::map<std::string, std::shared_ptr<const Series>> metrics;
  const Series* series(const std::string& key) const {
    auto found = metrics.find(key);
    return found == metrics.end() ? nullptr : found->second.get();
  }
  std::vector<EventRow> events;
  std::vector<CheckpointRow> checkpoints;
};

struct StoreSnapshot {
  std::string source;   // where the runs come from: "store PATH" or "service HOST:PORT"
  std::string home;     // their TFW_HOME (the service's, for a remote source)
  bool remote = false;  // read from a service: checkpoint files are on its machine
  // "TFW_HOME H", or "H on service HOST:PORT" for a remote source.
  std::string where() const;
  bool exists = false;  // there is a store to read (runs.db is there, the service answered)
  std::string error;    // the runs could not be read (newer schema, not SQLite, no service, ...)
  std::vector<RunRecord> runs;
  std::map<std::int64_t, std::shared_ptr<const RunData>> data;  // the watched runs
  std::vector<runner::ClusterJobRow> cluster_jobs;  // runs submitted to Slurm (states refreshed by the source)
  std::vector<EvaluationRow> evaluations;           // `tfw eval` results, by id
  std::uint64_t generation = 0;                     // bumps whenever anything changed
  double read_at = 0;                               // unix seconds of the poll
};

// The training tokens a run's lineage saw before it: for each ancestor, the tokens it had seen
// when the run below it was grown from it, summed, so that tokens + this is the cumulative
// tokens axis (a grown run continues where its parent's tokens ended, as cumulative FLOPs do).
// The store records the FLOPs inherited (inherited_flops), not the tokens; the ancestor's own
// FLOPs at the growth point are read back to tokens: its final tokens when it was grown from
// its end (the usual case); else by linear interpolation in its train/loss points' (flops,
// tokens) when the snapshot has them (a run with one model size has a constant tokens per
// FLOP, so this is exact between two points); else at its overall tokens per FLOP. NaN when
// an ancestor is not in the snapshot. 0 for a run grown from nothing.
double inherited_tokens(const StoreSnapshot& snapshot, const RunRecord& run);

// The runs and every ancestor of them (the watcher reads their points for inherited_tokens).
std::set<std::int64_t> with_ancestors(const StoreSnapshot& snapshot, const std::set<std::int64_t>& runs);

class StoreWatcher {
 public:
  // Starts polling `source` every `interval` seconds (0: never by itself; poll() only).
  StoreWatcher(std::unique_ptr<RunSource> source, double interval = 0.5);
  // The local store `home`/runs.db.
  explicit StoreWatcher(const std::string& home, double interval = 0.5);
  ~StoreWatcher();
  StoreWatcher(const StoreWatcher&) = delete;
  StoreWatcher& operator=(const StoreWatcher&) = delete;

  std::shared_ptr<const StoreSnapshot> snapshot() const;
  // The runs whose series the snapshots carry; returns whether that changed.
  bool watch(const std::set<std::int64_t>& runs);
  // Polls now on the calling thread (screenshots, tests) and returns the new snapshot.
  std::shared_ptr<const StoreSnapshot> poll();

 private:
  void loop();
  void refresh();  // one poll; the caller holds poll_mutex_

  std::unique_ptr<RunSource> source_;  // poll thread (under poll_mutex_)
  double interval_;
  mutable std::mutex mutex_;  // guards snapshot_ and watched_
  std::mutex poll_mutex_;     // one poll at a time
  std::condition_variable wake_;
  std::shared_ptr<const StoreSnapshot> snapshot_;
  std::set<std::int64_t> watched_;
  std::map<std::int64_t, std::shared_ptr<RunData>> cache_;  // poll thread only
  std::map<std::int64_t, RunCursor> cursors_;               // what each cached run has read
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tfw::gui
