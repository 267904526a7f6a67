// Frame time of the GUI's curves view with many long runs (issue 8's target: under 33 ms
// for 10 runs × 100k points under Xvfb's software OpenGL). Fills a fresh store in
// /tmp/tfw-bench-gui-<points> with `runs` loss curves of `points` points each, then renders
// the curves view headless for `frames` frames with the mouse sweeping across the plot
// (hover read-out on every frame), and the same with 100x fewer points side by side (the
// ratio is the cost of the data size), and zooming on every frame (the downsampling of every
// point is redone each frame instead of cached).
//   build/bench/bench_gui_curves [--runs 10] [--points 100000] [--frames 120]
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include <fmt/format.h>

#include "engine/plugin/registry.h"
#include "storage/store.h"

namespace fs = std::filesystem;

namespace {

std::string fill(int runs, long points) {
  const std::string home = fmt::format("/tmp/tfw-bench-gui-{}x{}", runs, points);
  fs::remove_all(home);
  fs::create_directories(home);
  auto store = tfw::Store::open(home + "/runs.db");
  tfw::MetricWriter writer(home + "/runs.db");
  std::mt19937 random(1);
  std::normal_distribution<double> noise(0, 0.05);
  for (int r = 0; r < runs; ++r) {
    tfw::RunRecord run;
    run.name = fmt::format("run-{}", r);
    run.family = r % 2 ? "transformer" : "tokenformer";
    const std::int64_t id = store->run_create(run);
    for (long i = 0; i < points; ++i) {
      const double progress = static_cast<double>(i) / static_cast<double>(points);
      writer.push({id, "train/loss", i, i * 2048, static_cast<double>(i) * 1e10, progress * 600,
                   1.4 + 0.1 * r / runs + 4.0 * std::exp(-8 * progress) + noise(random)});
    }
    store->run_finish(id, tfw::RunStatus::finished, "{}");
  }
  writer.flush();
  return home;
}

void render(const std::string& home, int runs, int frames, bool zoom = false) {
  std::string select;
  for (int r = 1; r <= runs; ++r) select += (r > 1 ? "," : "") + std::to_string(r);
  const std::string command = fmt::format(
      "xvfb-run -a -s '-screen 0 1600x1000x24' {}/tfw gui --home {} --view curves --select {} --size 1440 "
      "--bench-frames {}{}",
      tfw::executable_dir() + "/..", home, select, frames, zoom ? " --bench-zoom" : "");
  if (std::system(command.c_str()) != 0) fmt::print(stderr, "failed: {}\n", command);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10, frames = 120;
  long points = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs")
      runs = std::atoi(argv[i + 1]);
    else if (flag == "--points")
      points = std::atol(argv[i + 1]);
    else if (flag == "--frames")
      frames = std::atoi(argv[i + 1]);
  }
  const std::string small = fill(runs, std::max(1L, points / 100)), large = fill(runs, points);
  fmt::print("curves view, {} runs, 1440x900, Xvfb; {} frames each, median / p95 / max:\n", runs, frames);
  for (int round = 0; round < 2; ++round) {
    fmt::print("{:>8} points per run: ", points / 100);
    std::fflush(stdout);
    render(small, runs, frames);
    fmt::print("{:>8} points per run: ", points);
    std::fflush(stdout);
    render(large, runs, frames);
    fmt::print("{:>8} points, zooming:  ", points);
    std::fflush(stdout);
    render(large, runs, frames, true);
  }
  return 0;
}
