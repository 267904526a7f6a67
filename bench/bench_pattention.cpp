// Pattention forward+backward against an MLP of the same shape (Linear d->n, GELU,
// Linear n->d, no bias): the same 4·T·n·d FLOPs, so the ratio is the cost of the
// normalisation. T·B = 4096 rows. Usage: bench_pattention [--quick] [--threads N]
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "bench/bench_common.h"
#include "engine/pattention.h"
#include "engine/pattention_fused.h"
#include "engine/runtime.h"

int main(int argc, char** argv) {
  bool quick = false;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
  }
  tfw::runtime_init(threads);
  const std::int64_t rows = 4096;
  std::vector<std::int64_t> widths = quick ? std::vector<std::int64_t>{256} : std::vector<std::int64_t>{256, 512, 1024};
  std::vector<std::int64_t> tokens = quick ? std::vector<std::int64_t>{256, 1024}
                                           : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096};
  const int repeats = quick ? 3 : 5;
  std::cout << fmt::format("Pattention (l2_gelu) vs MLP d->n->d, forward+backward, T·B = {}, float32, {} threads, "
                           "LibTorch {}\n", rows, torch::get_num_threads(), tfw::torch_version());
  std::cout << fmt::format("{:>5} {:>5} {:>12} {:>12} {:>12} {:>8} {:>10} {:>10}\n", "d", "n", "fused ms", "mlp ms",
                           "ref ms", "fused/mlp", "ref/mlp", "fused GF/s");
  for (std::int64_t d : widths) {
    for (std::int64_t n : tokens) {
      torch::manual_seed(0);
      tfw::Pattention layer(tfw::PattentionOptions(d, d, n));
      torch::nn::Linear up(torch::nn::LinearOptions(d, n).bias(false));
      torch::nn::Linear down(torch::nn::LinearOptions(n, d).bias(false));
      torch::Tensor x = torch::randn({rows, d}, torch::requires_grad());
      torch::Tensor grad = torch::randn({rows, d});
      auto pattention_step = [&] {
        layer->forward(x).backward(grad);
      };
      auto reference_step = [&] {
        tfw::pattention_set_implementation(tfw::PattentionImplementation::reference);
        layer->forward(x).backward(grad);
        tfw::pattention_set_implementation(tfw::PattentionImplementation::fused);
      };
      auto mlp_step = [&] {
        down->forward(torch::gelu(up->forward(x))).backward(grad);
      };
      std::vector<double> t = tfw::bench::interleaved({pattention_step, mlp_step, reference_step}, repeats);
      const double flops = 3.0 * 4.0 * rows * n * d;  // forward 4·T·n·d, backward 2x
      std::cout << fmt::format("{:>5} {:>5} {:>12.2f} {:>12.2f} {:>12.2f} {:>8.3f} {:>10.3f} {:>10.1f}\n", d, n,
                               1e3 * t[0], 1e3 * t[1], 1e3 * t[2], t[0] / t[1], t[2] / t[1], flops / t[0] / 1e9);
    }
  }
  return 0;
}
