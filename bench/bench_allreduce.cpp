// The all-reduce a data-parallel step pays: float32 buffers of 4 KiB to 64 MiB summed over a
// c10d Gloo process group (engine/dist/dist_group.h), the same call the trainer makes for each
// gradient bucket. Run one process per rank with RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set (bench/data_parallel.sh starts two). Rank 0 prints one JSON line per size:
// the median over repetitions (at least 5, and at least 0.5 s of them, after 3 warm-ups)
// of the wall time of one all-reduce, and the bandwidths it implies:
//   algbw = bytes / time, busbw = algbw * 2 (W - 1) / W (what a ring moves per link).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "engine/dist/dist_group.h"
#include "engine/dist/distributed.h"
#include "engine/core/error.h"
#include "engine/machine/runtime.h"

int main() {
  try {
    tfw::runtime_init(1);
    const std::optional<tfw::DistEnv> env = tfw::dist_env_from_environment();
    if (!env) {
      std::fprintf(stderr, "bench_allreduce: set RANK, WORLD_SIZE (>= 2), MASTER_ADDR and MASTER_PORT\n");
      return 2;
    }
    std::shared_ptr<tfw::DistGroup> group = tfw::dist_connect(*env);
    using Clock = std::chrono::steady_clock;
    for (std::int64_t bytes : {4LL << 10, 64LL << 10, 1LL << 20, 4LL << 20, 16LL << 20, 64LL << 20}) {
      std::vector<torch::Tensor> buffer{torch::ones({bytes / 4}, torch::kFloat32)};
      for (int i = 0; i < 3; ++i) group->allreduce_sum(buffer, "warm-up");
      std::vector<double> times;
      const auto started = Clock::now();
      // Every rank must make the same number of calls: rank 0 decides when to stop.
      while (true) {
        group->barrier("start");
        const auto t0 = Clock::now();
        group->allreduce_sum(buffer, "all-reduce");
        times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        const bool done = times.size() >= 5 && std::chrono::duration<double>(Clock::now() - started).count() > 0.5;
        std::vector<torch::Tensor> flag{torch::tensor({done ? 1.0 : 0.0}, torch::kFloat64)};
        group->broadcast(flag, "stop");
        if (flag[0].item<double>() > 0) break;
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      const double world = group->world();
      if (group->rank() == 0) {
        std::printf("%s\n", fmt::format(R"({{"bytes":{},"repetitions":{},"median_seconds":{:.6e},"algbw_GBps":{:.3f},)"
                                        R"("busbw_GBps":{:.3f}}})",
                                        bytes, times.size(), median, bytes / median / 1e9,
                                        bytes / median / 1e9 * 2 * (world - 1) / world)
                                .c_str());
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}
