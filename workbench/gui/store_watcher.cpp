// See store_watcher.h.
#include "workbench/gui/store_watcher.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "workbench/common/plot_math.h"

namespace tfw::gui {

std::string StoreSnapshot::where() const { return remote ? "TFW_HOME " + home + " on " + source : "TFW_HOME " + home; }

StoreWatcher::StoreWatcher(std::unique_ptr<RunSource> source, double interval)
    : source_(std::move(source)), interval_(interval), snapshot_(std::make_shared<StoreSnapshot>()) {
  if (interval_ > 0) thread_ = std::thread([this] { loop(); });
}

StoreWatcher::StoreWatcher(const std::string& home, double interval)
    : StoreWatcher(std::make_unique<LocalRunSource>(home), interval) {}

StoreWatcher::~StoreWatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const StoreSnapshot> StoreWatcher::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_;
}

bool StoreWatcher::watch(const std::set<std::int64_t>& runs) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (runs == watched_) return false;
    watched_ = runs;
  }
  wake_.notify_all();  // fetch the new runs' series now, not at the next tick
  return true;
}

std::shared_ptr<const StoreSnapshot> StoreWatcher::poll() {
  {
    std::lock_guard<std::mutex> lock(poll_mutex_);
    refresh();
  }
  return snapshot();
}

void StoreWatcher::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    {
      std::lock_guard<std::mutex> poll_lock(poll_mutex_);
      refresh();
    }
    lock.lock();
    wake_.wait_for(lock, std::chrono::duration<double>(interval_));
  }
}

namespace {

void append(Series& series, const MetricPoint& p) {
  series.step.push_back(static_cast<double>(p.step));
  series.tokens.push_back(static_cast<double>(p.tokens));
  series.flops.push_back(p.flops);
  series.wall.push_back(p.wall);
  series.value.push_back(p.value);
}

}  // namespace

void StoreWatcher::refresh() {
  auto next = std::make_shared<StoreSnapshot>();
  next->source = source_->describe();
  next->remote = source_->remote();
  next->read_at = store_now();
  std::set<std::int64_t> watched;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watched = watched_;
  }
  bool changed = false;
  try {
    next->exists = source_->exists();
    if (next->exists) {
      next->runs = source_->runs();
      next->cluster_jobs = source_->cluster_jobs();
      next->evaluations = source_->evaluations();
      for (const RunRecord& record : next->runs) {
        if (!watched.count(record.id)) continue;
        auto& cached = cache_[record.id];
        RunCursor& cursor = cursors_[record.id];
        // A run that was resumed (status or start time changed) replaces re-trained steps:
        // read it whole again. Otherwise only what the cursor has not seen.
        const bool restart =
            !cached || cached->record.status != record.status || cached->record.started != record.started;
        if (restart) cursor = RunCursor();
        auto data = std::make_shared<RunData>();
        if (!restart) {
          data->metrics = cached->metrics;  // shared series; one that grows is copied
          data->events = cached->events;
        }
        RunNews news = source_->news(record.id, cursor);
        for (std::size_t i = 0; i < news.points.size();) {  // points come by key, then step
          const std::string& key = news.points[i].key;
          std::shared_ptr<const Series>& slot = data->metrics[key];
          auto series = slot ? std::make_shared<Series>(*slot) : std::make_shared<Series>();
          for (; i < news.points.size() && news.points[i].key == key; ++i) append(*series, news.points[i]);
          slot = series;
        }
        data->events.insert(data->events.end(), news.events.begin(), news.events.end());
        data->record = record;
        data->checkpoints = source_->checkpoints(record.id);  // pruning removes rows: read whole
        const bool same = !restart && news.empty() && cached->record.heartbeat == record.heartbeat &&
                          cached->record.tokens == record.tokens &&
                          cached->checkpoints.size() == data->checkpoints.size();
        if (!same) {
          cached = data;
          changed = true;
        }
        next->data[record.id] = cached;
      }
      for (auto it = cache_.begin(); it != cache_.end();) {
        if (watched.count(it->first)) {
          ++it;
        } else {
          cursors_.erase(it->first);
          it = cache_.erase(it);
        }
      }
    }
  } catch (const std::exception& e) {
    next->error = e.what();
    source_->reset();  // reopen at the next poll (the file may be replaced or migrated, the service restarted)
  }
  next->home = source_->home();  // a remote source learns it when it connects
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreSnapshot& previous = *snapshot_;
  changed = changed || previous.error != next->error || previous.exists != next->exists ||
            previous.runs.size() != next->runs.size() || previous.data.size() != next->data.size() ||
            previous.cluster_jobs.size() != next->cluster_jobs.size() ||
            previous.evaluations.size() != next->evaluations.size();
  for (std::size_t i = 0; !changed && i < next->cluster_jobs.size(); ++i) {
    changed = previous.cluster_jobs[i].state != next->cluster_jobs[i].state;
  }
  if (!changed) {
    for (std::size_t i = 0; i < next->runs.size(); ++i) {
      const RunRecord &a = previous.runs[i], &b = next->runs[i];
      if (a.id != b.id || a.status != b.status || a.tokens != b.tokens || a.heartbeat != b.heartbeat) {
        changed = true;
        break;
      }
    }
  }
  generation_ += changed ? 1 : 0;
  next->generation = generation_;
  snapshot_ = next;
}

namespace {

const RunRecord* record_of(const StoreSnapshot& snapshot, std::int64_t id) {
  for (const RunRecord& r : snapshot.runs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

// The tokens `run` had seen when its own FLOPs were `flops` (see inherited_tokens).
double tokens_at_own_flops(const StoreSnapshot& snapshot, const RunRecord& run, double flops) {
  if (run.flops > 0 && std::abs(flops - run.flops) <= 1e-9 * run.flops) return static_cast<double>(run.tokens);
  const auto data = snapshot.data.find(run.id);
  const Series* series = data == snapshot.data.end() ? nullptr : data->second->series("train/loss");
  if (series && !series->flops.empty() && flops <= series->flops.back()) {
    // From (0, 0), the run's start, to its first point; then through its points.
    const double f1 = series->flops.front(), t1 = series->tokens.front();
    if (flops <= f1) return f1 == 0 ? t1 : flops / f1 * t1;
    return interpolate(series->flops, series->tokens, flops, Outside::nan);
  }
  return run.flops > 0 ? static_cast<double>(run.tokens) * flops / run.flops : 0.0;
}

}  // namespace

double inherited_tokens(const StoreSnapshot& snapshot, const RunRecord& run) {
  double tokens = 0;
  const RunRecord* child = &run;
  for (int depth = 0; child->parent != 0; ++depth) {
    const RunRecord* parent = record_of(snapshot, child->parent);
    if (!parent || depth > 1000) return std::nan("");
    // The parent's own FLOPs when the child was grown from it.
    const double at = std::max(0.0, child->inherited_flops) - std::max(0.0, parent->inherited_flops);
    tokens += tokens_at_own_flops(snapshot, *parent, std::max(0.0, at));
    child = parent;
  }
  return tokens;
}

std::set<std::int64_t> with_ancestors(const StoreSnapshot& snapshot, const std::set<std::int64_t>& runs) {
  std::set<std::int64_t> all = runs;
  for (std::int64_t id : runs) {
    const RunRecord* r = record_of(snapshot, id);
    for (int depth = 0; r && r->parent != 0 && depth < 1000; ++depth) {
      if (!all.insert(r->parent).second) break;  // its ancestors are in already
      r = record_of(snapshot, r->parent);
    }
  }
  return all;
}

}  // namespace tfw::gui
