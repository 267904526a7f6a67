// Metric points over time: the incremental reader (what a watcher has not seen yet) and the
// one writer per process (queued points committed in batches on its own thread and
// connection, with the heartbeats of the runs registered with it). See store.h.
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "storage/sqlite_statement.h"
#include "storage/store.h"

namespace tfw {

using detail::Statement;

RunNews Store::news(std::int64_t run, RunCursor& cursor) {
  RunNews news;
  std::vector<std::string> keys;
  {
    Statement s(db_, "SELECT DISTINCT key FROM metrics WHERE run_id = ? ORDER BY key");
    s.bind(1, run);
    while (s.step()) keys.push_back(s.text(0));
  }
  // Per key, the steps after the last one seen (the primary key's order: an index range).
  Statement points(db_,
                   "SELECT run_id, key, step, tokens, flops, wall, value FROM metrics WHERE run_id = ?1 AND "
                   "key = ?2 AND step > ?3 ORDER BY step");
  for (const std::string& key : keys) {
    auto seen = cursor.last_step.find(key);
    points.reset();
    points.bind(1, run).bind(2, key).bind(3, seen == cursor.last_step.end() ? std::int64_t{-1} : seen->second);
    while (points.step()) {
      news.points.push_back({points.integer(0), points.text(1), points.integer(2), points.integer(3), points.real(4),
                             points.real(5), points.is_null(6) ? std::nan("") : points.real(6)});
      cursor.last_step[key] = news.points.back().step;
    }
  }
  Statement events(db_,
                   "SELECT run_id, step, kind, payload, wall, id FROM events WHERE run_id = ?1 AND id > ?2 "
                   "ORDER BY id");
  events.bind(1, run).bind(2, cursor.last_event);
  while (events.step()) {
    news.events.push_back(
        {events.integer(0), events.integer(1), events.text(2), events.text(3), events.real(4), events.integer(5)});
    cursor.last_event = news.events.back().id;
  }
  return news;
}

MetricWriter::MetricWriter(const std::string& path, std::size_t capacity)
    : store_(Store::open(path)), capacity_(capacity), thread_([this] { loop(); }) {}

MetricWriter::~MetricWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MetricWriter::push(MetricPoint point) {
  std::unique_lock<std::mutex> lock(mutex_);
  space_.wait(lock, [&] { return queue_.size() < capacity_ || !error_.empty(); });
  if (!error_.empty()) throw StoreError(error_);
  queue_.push_back(std::move(point));
  ++pushed_;
  if (queue_.size() >= std::min<std::size_t>(512, capacity_)) wake_.notify_one();
}

void MetricWriter::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::int64_t target = pushed_;
  flush_requested_ = true;
  wake_.notify_one();
  done_.wait(lock, [&] { return committed_ >= target || !error_.empty(); });
  if (!error_.empty()) throw StoreError(error_);
}

void MetricWriter::heartbeat_add(std::int64_t run) {
  std::lock_guard<std::mutex> lock(mutex_);
  heartbeats_.insert(run);
}

void MetricWriter::heartbeat_remove(std::int64_t run) {
  std::lock_guard<std::mutex> lock(mutex_);
  heartbeats_.erase(run);
}

std::int64_t MetricWriter::committed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return committed_;
}

void MetricWriter::loop() {
  auto last_beat = std::chrono::steady_clock::now() - std::chrono::hours(1);
  while (true) {
    std::vector<MetricPoint> batch;
    std::set<std::int64_t> beats;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Commit at least every 50 ms (live subscribers see a point within that); sooner when 512
      // points (or a full queue) wait, or on flush().
      wake_.wait_for(lock, std::chrono::milliseconds(50), [&] {
        return stopping_ || queue_.size() >= std::min<std::size_t>(512, capacity_) || flush_requested_;
      });
      flush_requested_ = false;
      batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
      stop = stopping_;
      if (std::chrono::steady_clock::now() - last_beat > std::chrono::seconds(1)) beats = heartbeats_;
    }
    space_.notify_all();
    try {
      store_->metrics_insert(batch);
      for (std::int64_t run : beats) store_->run_heartbeat(run);
      if (!beats.empty()) last_beat = std::chrono::steady_clock::now();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = fmt::format("the store writer failed: {}", e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error_.empty()) committed_ += static_cast<std::int64_t>(batch.size());
    }
    done_.notify_all();
    space_.notify_all();
    if (stop) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty() || !error_.empty()) return;
    }
  }
}

}  // namespace tfw
