// Causal softmax attention, forward+backward, side by side: tfw's fused CPU operator
// (engine/kernels/cpu/attention_fused.h, AttentionKernel::cpu) against the composition of torch ops
// (AttentionKernel::manual), median of interleaved repetitions, at the shapes of the
// quickstart and bench configs. Usage: bench_attention [--threads N] [--repeats N]
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "bench/bench_common.h"
#include "engine/nn/attention.h"
#include "engine/machine/runtime.h"

int main(int argc, char** argv) {
  int threads = 0, repeats = 21;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
  }
  tfw::runtime_init(threads);
  struct Shape {
    std::int64_t B, H, T, dh;
  };
  const std::vector<Shape> shapes = {{16, 4, 128, 32}, {8, 4, 256, 32}, {4, 8, 512, 64}, {2, 12, 1024, 64}};
  std::cout << fmt::format("causal attention forward+backward, float32, {} threads, median of {} interleaved\n",
                           torch::get_num_threads(), repeats);
  std::cout << fmt::format("  {:>4} {:>3} {:>5} {:>3}  {:>10} {:>10} {:>8}\n", "B", "H", "T", "dh", "manual ms",
                           "fused ms", "fused/manual");
  for (const Shape& s : shapes) {
    torch::manual_seed(0);
    auto make = [&] { return torch::randn({s.B, s.T, s.H, s.dh}).transpose(1, 2).requires_grad_(true); };
    torch::Tensor q = make(), k = make(), v = make();
    torch::Tensor grad = torch::randn({s.B, s.H, s.T, s.dh});
    auto body = [&](tfw::AttentionKernel kernel) {
      return [&, kernel] {
        torch::Tensor out = tfw::causal_attention(q, k, v, kernel);
        out.backward(grad);
      };
    };
    const std::vector<double> t =
        tfw::bench::interleaved({body(tfw::AttentionKernel::manual), body(tfw::AttentionKernel::cpu)}, repeats);
    std::cout << fmt::format("  {:>4} {:>3} {:>5} {:>3}  {:>10.2f} {:>10.2f} {:>8.3f}\n", s.B, s.H, s.T, s.dh,
                             1e3 * t[0], 1e3 * t[1], t[1] / t[0]);
  }
  return 0;
}
