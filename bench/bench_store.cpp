// The run store's costs, side by side in one run:
//  1. ingest rate of metric points through MetricWriter (batched transactions, WAL);
//  2. the overhead of recording 10 metrics per step on a real training step (a small
//     Tokenformer forward/backward/AdamW), interleaved with and without recording.
// Usage: bench_store [--points N] [--steps N]
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "bench/bench_common.h"
#include "engine/nn/pattention.h"
#include "engine/machine/runtime.h"
#include "storage/store.h"

int main(int argc, char** argv) {
  std::int64_t points = 1000000;
  int steps = 30;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--points") && i + 1 < argc)
      points = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = std::atoi(argv[++i]);
  }
  tfw::runtime_init();
  const std::string dir = (std::filesystem::temp_directory_path() / "tfw-bench-store").string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/runs.db";
  auto store = tfw::Store::open(path);
  tfw::RunRecord record;
  record.name = "bench";
  record.family = "tokenformer";
  record.config = "";
  const std::int64_t run = store->run_create(record);

  // 1. Ingest.
  double ingest_seconds = 0;
  {
    tfw::MetricWriter writer(path);
    ingest_seconds = tfw::bench::seconds_of([&] {
      for (std::int64_t i = 0; i < points; ++i) writer.push({run, "train/loss", i, i, 1.0 * i, 0.0, 0.5});
      writer.flush();
    });
  }
  std::cout << fmt::format("ingest: {} points in {:.3f} s = {:.0f} points/s (committed: {})\n", points, ingest_seconds,
                           points / ingest_seconds, store->metrics_count(run));

  // 2. Overhead on a training step: a Pattention MLP-sized block, B·T = 2048 rows, d = 256.
  torch::manual_seed(0);
  tfw::Pattention layer(tfw::PattentionOptions(256, 256, 1024));
  torch::optim::AdamW optimizer(layer->parameters(), torch::optim::AdamWOptions(1e-3));
  torch::Tensor x = torch::randn({2048, 256});
  tfw::MetricWriter writer(path);
  std::int64_t step = points;
  auto train_step = [&] {
    optimizer.zero_grad();
    layer->forward(x).square().mean().backward();
    optimizer.step();
  };
  auto recorded_step = [&] {
    train_step();
    ++step;
    for (int k = 0; k < 10; ++k) writer.push({run, fmt::format("metric/{}", k), step, step, 1.0, 0.0, 1.0 * k});
  };
  std::vector<double> t = tfw::bench::interleaved({train_step, recorded_step}, steps);
  writer.flush();
  std::cout << fmt::format(
      "training step: {:.2f} ms plain, {:.2f} ms with 10 metrics recorded: overhead {:+.3f}% "
      "(median of {} interleaved steps)\n",
      1e3 * t[0], 1e3 * t[1], 100.0 * (t[1] - t[0]) / t[0], steps);
  // The cost on the training thread itself is the push: time 10 pushes directly.
  const int rounds = 20000;
  double push_seconds = tfw::bench::seconds_of([&] {
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 10; ++k) writer.push({run, "push/k", ++step, step, 1.0, 0.0, 1.0});
    }
  });
  writer.flush();
  std::cout << fmt::format("push: {:.2f} us per point, {:.1f} us per 10-metric step = {:.4f}% of the plain step\n",
                           1e6 * push_seconds / (rounds * 10.0), 1e6 * push_seconds / rounds,
                           100.0 * (push_seconds / rounds) / t[0]);
  return 0;
}
