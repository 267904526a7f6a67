// Metric delivery latency of the engine service (issue 9's target: p99 under 100 ms at 200
// subscribers): a real `tfw serve` on loopback, N clients watching one run, a MetricWriter
// pushing points at a steady rate with the push time as the value; each client records
// receipt time minus push time for every point. So a figure includes the writer's batching
// (commits every 50 ms), the service's store poll (every 20 ms) and the fan-out. Runs 1 and
// N subscribers side by side.
//   build/bench/bench_service [--clients 200] [--points 1000] [--rate 200]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "engine/plugin/registry.h"
#include "storage/store.h"
#include "workbench/service/serve_process.h"
#include "workbench/service/client.h"

namespace fs = std::filesystem;

namespace {

struct Figures {
  double p50 = 0, p99 = 0, max = 0;
  std::size_t received = 0;
};

Figures measure(int clients, int points, double rate) {
  const std::string home = fmt::format("/tmp/tfw-bench-service-{}", clients);
  fs::remove_all(home);
  fs::create_directories(home);
  auto store = tfw::Store::open(home + "/runs.db");
  tfw::RunRecord record;
  record.name = "live";
  record.family = "tokenformer";
  const std::int64_t run = store->run_create(record);
  tfw::service::ServeProcess server(tfw::executable_dir() + "/../tfw", {"--listen", "127.0.0.1:0", "--home", home});
  std::vector<std::unique_ptr<tfw::service::Client>> subscribers;
  for (int i = 0; i < clients; ++i) {
    subscribers.push_back(std::make_unique<tfw::service::Client>(server.address()));
    subscribers.back()->send({{"type", "watch"}, {"run", run}});
  }
  std::mutex mutex;
  std::vector<double> latencies;
  std::atomic<int> ready{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < clients; ++i) {
    readers.emplace_back([&, i] {
      std::vector<double> mine;
      int seen = 0;
      while (seen < points) {
        nlohmann::json message = subscribers[i]->receive(60);
        const double now = tfw::store_now();
        if (message["type"] == "caught_up") ++ready;
        if (message["type"] != "metric") continue;
        mine.push_back(now - message["value"].get<double>());
        ++seen;
      }
      std::lock_guard<std::mutex> lock(mutex);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  while (ready < clients) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  {
    tfw::MetricWriter writer(home + "/runs.db");
    const auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < points; ++step) {
      std::this_thread::sleep_until(start + std::chrono::duration<double>(step / rate));
      writer.push({run, "train/loss", step, step, 0, 0, tfw::store_now()});
    }
    writer.flush();
  }
  for (std::thread& reader : readers) reader.join();
  std::sort(latencies.begin(), latencies.end());
  Figures f;
  f.received = latencies.size();
  f.p50 = latencies[latencies.size() / 2] * 1e3;
  f.p99 = latencies[latencies.size() * 99 / 100] * 1e3;
  f.max = latencies.back() * 1e3;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 200, points = 1000;
  double rate = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--clients")
      clients = std::atoi(argv[i + 1]);
    else if (flag == "--points")
      points = std::atoi(argv[i + 1]);
    else if (flag == "--rate")
      rate = std::atof(argv[i + 1]);
  }
  fmt::print("delivery latency, point pushed -> subscriber has it; {} points at {:g}/s\n", points, rate);
  for (int n : {1, clients}) {
    const Figures f = measure(n, points, rate);
    fmt::print("{:>4} subscriber{}: p50 {:6.1f} ms  p99 {:6.1f} ms  max {:6.1f} ms  ({} deliveries)\n", n,
               n == 1 ? " " : "s", f.p50, f.p99, f.max, f.received);
  }
  return 0;
}
