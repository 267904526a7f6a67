// Live feeds: subscribers of a run get its history (the catch-up), then every new metric
// point, event and status as the poller reads them from the store.
#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "workbench/service/service_impl.h"

namespace tfw::service {

void Service::Impl::subscribe(const std::shared_ptr<Connection>& c, std::int64_t run) {
  Feed& feed = feeds[run];
  if (c->subscriptions.count(run)) return;
  c->subscriptions.insert(run);
  feed.subscribers.insert(c);
  for (const Line& line : feed.history) c->send(line);  // catch-up
  if (feed.loaded) c->send(make_line({{"type", "caught_up"}, {"run", run}, {"status", feed.status}}));
  std::lock_guard<std::mutex> lock(watched_mutex);
  watched.insert(run);
}

// On the io thread: new lines of a run from the poller.
void Service::Impl::publish(std::int64_t run, std::vector<Line> lines, std::string status, bool initial) {
  auto found = feeds.find(run);
  if (found == feeds.end()) return;  // every subscriber left
  Feed& feed = found->second;
  if (initial && feed.loaded) return;
  if (!status.empty() && status != feed.status) {
    feed.status = status;
    lines.push_back(make_line({{"type", "status"}, {"run", run}, {"status", status}}));
  }
  for (const Line& line : lines) {
    feed.history.push_back(line);
    for (const auto& c : std::vector<std::shared_ptr<Connection>>(feed.subscribers.begin(), feed.subscribers.end())) {
      c->send(line);
    }
  }
  if (initial) {
    feed.loaded = true;
    const Line caught_up = make_line({{"type", "caught_up"}, {"run", run}, {"status", feed.status}});
    for (const auto& c : std::vector<std::shared_ptr<Connection>>(feed.subscribers.begin(), feed.subscribers.end())) {
      c->send(caught_up);
    }
  }
}

// Reads new points, events and status of the watched runs through a LocalRunSource; a run
// seen for the first time is read whole (the catch-up), later only what is new.
void Service::Impl::poll_loop() {
  LocalRunSource source(home);  // the poller's own reader (the io thread has another)
  struct Cursor {
    RunCursor read;  // points and events seen
    std::string status;
  };
  std::map<std::int64_t, Cursor> cursors;
  while (!stopping) {
    std::set<std::int64_t> runs;
    {
      std::lock_guard<std::mutex> lock(watched_mutex);
      runs = watched;
    }
    for (auto it = cursors.begin(); it != cursors.end();)
      it = runs.count(it->first) ? std::next(it) : cursors.erase(it);
    try {
      for (std::int64_t run : runs) {
        const bool initial = !cursors.count(run);
        Cursor& cursor = cursors[run];
        RunNews news = source.news(run, cursor.read);
        std::stable_sort(news.points.begin(), news.points.end(),
                         [](const MetricPoint& a, const MetricPoint& b) { return a.step < b.step; });
        std::vector<Line> lines;
        for (const MetricPoint& p : news.points) {
          lines.push_back(make_line({{"type", "metric"},
                                     {"run", run},
                                     {"key", p.key},
                                     {"step", p.step},
                                     {"tokens", p.tokens},
                                     {"flops", p.flops},
                                     {"wall", p.wall},
                                     {"value", std::isfinite(p.value) ? json(p.value) : json(nullptr)}}));
        }
        for (const EventRow& event : news.events) {
          json payload = json::parse(event.payload, nullptr, false);
          lines.push_back(make_line({{"type", "event"},
                                     {"run", run},
                                     {"kind", event.kind},
                                     {"step", event.step},
                                     {"payload", payload.is_discarded() ? json(event.payload) : payload}}));
        }
        std::optional<RunRecord> record = source.run(run);
        const std::string status = record ? status_name(record->status) : "";
        const bool status_changed = status != cursor.status;
        cursor.status = status;
        if (lines.empty() && !status_changed && !initial) continue;
        asio::post(io, [this, run, lines = std::move(lines), status, initial]() mutable {
          publish(run, std::move(lines), status, initial);
        });
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "tfw serve: reading the store: {}\n", e.what());
      source.reset();
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options.poll_interval));
  }
}

}  // namespace tfw::service
