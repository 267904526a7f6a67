// Pattention forward+backward against an MLP of the same shape (Linear d->n, GELU,
// Linear n->d, no bias): the same 4·T·n·d FLOPs, so the ratio is the cost of the
// normalisation. T·B = 4096 rows, l2_gelu. Three parts, each measured side by side:
//  1. the grid d 256/512/1024 × n 256..4096: the fused operator, the reference composition
//     (TFW_PATTENTION=reference) and the MLP, in fp32 and in bf16 (autocast, as
//     train.precision = "bf16"); median of interleaved repetitions of one step each;
//  2. the row norm of l2_gelu from S (one pass over the scores) against the Gram-matrix
//     route rowsum((X·KᵀK) ⊙ X), forward only, median of interleaved repetitions;
//  3. the peak resident memory of one forward+backward at d 256, n 4096, T 1024 (B 1),
//     fused against reference: VmHWM after resetting it (/proc/self/clear_refs) minus the
//     resident memory before the step (large blocks mapped and unmapped one by one).
// With --device cuda (issue 35), one part instead, on the GPU: d 768/1024/2048 × n
// 768..8192, T·B = 8192, forward+backward of Pattention with the fused CUDA kernels
// (engine/kernels/cuda/pattention_cuda.cu), with the composition, and of the MLP, in bf16 (autocast) by
// default; each figure is the median of 15 interleaved repetitions of 5 steps, timed by the
// host clock between device synchronisations, divided by 5. "agree" is the largest difference
// between the fused and the composed layer's outputs, over the largest output.
// Usage: bench_pattention [--quick] [--threads N] [--precision fp32|bf16|both] [--device cuda]
#include <malloc.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "bench/bench_common.h"
#include "engine/machine/device.h"
#include "engine/nn/pattention.h"
#include "engine/kernels/cpu/pattention_kernels.h"
#include "engine/nn/pattention_fused.h"
#include "engine/machine/runtime.h"

namespace {

// kB from /proc/self/status ("VmRSS", "VmHWM").
long status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// Peak resident memory above the current level while `body` runs, in MiB. Freed memory
// goes back to the system first (malloc_trim; part 3 makes every block of 64 KiB or more its
// own mapping), so that one body cannot run in pages another left resident.
double peak_mib(const std::function<void()>& body) {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
  const long before = status_kb("VmRSS");
  body();
  return static_cast<double>(status_kb("VmHWM") - before) / 1024.0;
}

// What one row of a table compares, built from seed 0 on `device`: a Pattention d -> d with n
// parameter tokens, and the MLP d -> n -> d (no biases) of the same parameter count.
struct Contenders {
  tfw::Pattention layer{nullptr};
  torch::nn::Linear up{nullptr}, down{nullptr};
};

Contenders contenders(std::int64_t d, std::int64_t n, torch::Device device) {
  torch::manual_seed(0);
  Contenders c;
  c.layer = tfw::Pattention(tfw::PattentionOptions(d, d, n));
  c.up = torch::nn::Linear(torch::nn::LinearOptions(d, n).bias(false));
  c.down = torch::nn::Linear(torch::nn::LinearOptions(n, d).bias(false));
  c.layer->to(device);
  c.up->to(device);
  c.down->to(device);
  return c;
}

void use(tfw::PattentionImplementation implementation) { tfw::pattention_set_implementation(implementation); }

int cuda_part(bool quick, const std::string& precisions) {
  if (!tfw::cuda_available()) {
    std::cerr << "bench_pattention --device cuda: no CUDA device here (LibTorch " << tfw::torch_version() << ")\n";
    return 1;
  }
  const torch::Device device(torch::kCUDA, 0);
  const std::int64_t rows = 8192;
  const std::vector<std::int64_t> widths =
      quick ? std::vector<std::int64_t>{768} : std::vector<std::int64_t>{768, 1024, 2048};
  const std::vector<std::int64_t> tokens =
      quick ? std::vector<std::int64_t>{768, 4096} : std::vector<std::int64_t>{768, 2048, 4096, 8192};
  const int repeats = 15, steps = 5;
  std::vector<tfw::Precision> runs;
  if (precisions == "fp32" || precisions == "both") runs.push_back(tfw::Precision::fp32);
  if (precisions != "fp32") runs.push_back(tfw::Precision::bf16);
  std::cout << fmt::format(
      "Pattention (l2_gelu) vs MLP d->n->d on {}, forward+backward, T·B = {}, LibTorch {}; "
      "median of {} interleaved repetitions of {} steps\n",
      tfw::compute_device_name("cuda"), rows, tfw::torch_version(), repeats, steps);
  std::cout << fmt::format("{:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8} {:>7} {:>11} {:>9} {:>9}\n",
                           "prec", "d", "n", "fused ms", "mlp ms", "comp ms", "reg ms", "fused/mlp", "comp/mlp",
                           "reg/mlp", "fused TF/s", "agree", "reg agree");
  for (tfw::Precision precision : runs) {
    for (std::int64_t d : widths) {
      for (std::int64_t n : tokens) {
        Contenders c = contenders(d, n, device);
        torch::Tensor x = torch::randn({rows, d}, torch::TensorOptions().device(device).requires_grad(true));
        torch::Tensor grad = torch::randn({rows, d}, torch::TensorOptions().device(device));
        auto forward = [&](const std::function<torch::Tensor()>& body) {
          const tfw::AutocastGuard autocast(precision, device);
          return body();
        };
        auto timed = [&](const std::function<torch::Tensor()>& body) {
          return [&, body] {
            for (int k = 0; k < steps; ++k) {
              torch::Tensor out = forward(body);
              out.backward(grad.to(out.scalar_type()));
            }
            torch::cuda::synchronize();
          };
        };
        auto pattention = [&] { return c.layer->forward(x); };
        // fused: the default kernels; composed: the composition; registers: the kernels that keep
        // a row in registers (TFW_PATTENTION_CUDA=registers).
        enum class Way { fused, composed, registers };
        auto with_kernels = [&](Way way, const std::function<torch::Tensor()>& body) {
          return [&, way, body] {
            tfw::pattention_set_cuda_fused(way != Way::composed);
            tfw::pattention_set_cuda_registers(way == Way::registers);
            const torch::Tensor out = body();
            tfw::pattention_set_cuda_fused(true);  // the defaults
            tfw::pattention_set_cuda_registers(false);
            return out;
          };
        };
        auto mlp = [&] { return c.down->forward(torch::gelu(c.up->forward(x))); };
        torch::cuda::synchronize();
        std::vector<double> t = tfw::bench::interleaved(
            {timed(with_kernels(Way::fused, pattention)), timed(mlp), timed(with_kernels(Way::composed, pattention)),
             timed(with_kernels(Way::registers, pattention))},
            repeats);
        for (double& seconds : t) seconds /= steps;
        double agree = 0, registers_agree = 0;
        {
          torch::NoGradGuard no_grad;
          const torch::Tensor a = forward(with_kernels(Way::fused, pattention)).to(torch::kFloat32);
          const torch::Tensor b = forward(with_kernels(Way::composed, pattention)).to(torch::kFloat32);
          const torch::Tensor r = forward(with_kernels(Way::registers, pattention)).to(torch::kFloat32);
          agree = (a - b).abs().max().item<double>() / b.abs().max().item<double>();
          registers_agree = (r - b).abs().max().item<double>() / b.abs().max().item<double>();
        }
        const double flops = 3.0 * 4.0 * rows * n * d;  // forward 4·T·n·d, backward 2x
        std::cout << fmt::format(
            "{:>5} {:>5} {:>5} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>9.3f} {:>8.3f} {:>7.3f} {:>11.1f} {:>9.1e} "
            "{:>9.1e}\n",
            tfw::precision_name(precision), d, n, 1e3 * t[0], 1e3 * t[1], 1e3 * t[2], 1e3 * t[3], t[0] / t[1],
            t[2] / t[1], t[3] / t[1], flops / t[0] / 1e12, agree, registers_agree);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int threads = 0;
  std::string precisions = "both", device = "cpu";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--precision") && i + 1 < argc)
      precisions = argv[++i];
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      device = argv[++i];
  }
  tfw::runtime_init(threads);
  if (device == "cuda") return cuda_part(quick, precisions);
  if (device != "cpu") {
    std::cerr << "bench_pattention: --device is cpu or cuda\n";
    return 2;
  }
  using tfw::PattentionImplementation;
  const std::int64_t rows = 4096;
  std::vector<std::int64_t> widths = quick ? std::vector<std::int64_t>{256} : std::vector<std::int64_t>{256, 512, 1024};
  std::vector<std::int64_t> tokens =
      quick ? std::vector<std::int64_t>{256, 1024} : std::vector<std::int64_t>{256, 512, 1024, 2048, 4096};
  const int repeats = quick ? 3 : 5;
  std::vector<tfw::Precision> runs;
  if (precisions != "bf16") runs.push_back(tfw::Precision::fp32);
  if (precisions != "fp32") runs.push_back(tfw::Precision::bf16);

  std::cout << fmt::format(
      "1. Pattention (l2_gelu) vs MLP d->n->d, forward+backward, T·B = {}, {} threads, LibTorch {}, "
      "fused float32 kernels: {}; median of {} interleaved steps\n",
      rows, torch::get_num_threads(), tfw::torch_version(), tfw::pattention_fused_vectorised() ? "AVX2" : "scalar",
      repeats);
  std::cout << fmt::format("{:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>9} {:>8} {:>10}\n", "prec", "d", "n", "fused ms",
                           "mlp ms", "ref ms", "fused/mlp", "ref/mlp", "fused GF/s");
  for (tfw::Precision precision : runs) {
    for (std::int64_t d : widths) {
      for (std::int64_t n : tokens) {
        Contenders c = contenders(d, n, torch::kCPU);
        torch::Tensor x = torch::randn({rows, d}, torch::requires_grad());
        torch::Tensor grad = torch::randn({rows, d});
        auto step = [&](const std::function<torch::Tensor()>& forward) {
          torch::Tensor out;
          {
            const tfw::AutocastGuard autocast(precision, torch::kCPU);
            out = forward();
          }
          out.backward(grad.to(out.scalar_type()));
        };
        auto fused_step = [&] {
          use(PattentionImplementation::fused);
          step([&] { return c.layer->forward(x); });
        };
        auto reference_step = [&] {
          use(PattentionImplementation::reference);
          step([&] { return c.layer->forward(x); });
          use(PattentionImplementation::fused);
        };
        auto mlp_step = [&] { step([&] { return c.down->forward(torch::gelu(c.up->forward(x))); }); };
        std::vector<double> t = tfw::bench::interleaved({fused_step, mlp_step, reference_step}, repeats);
        const double flops = 3.0 * 4.0 * rows * n * d;  // forward 4·T·n·d, backward 2x
        std::cout << fmt::format("{:>5} {:>5} {:>5} {:>10.2f} {:>10.2f} {:>10.2f} {:>9.3f} {:>8.3f} {:>10.1f}\n",
                                 tfw::precision_name(precision), d, n, 1e3 * t[0], 1e3 * t[1], 1e3 * t[2], t[0] / t[1],
                                 t[2] / t[1], flops / t[0] / 1e9);
      }
    }
  }

  std::cout << fmt::format(
      "\n2. l2_gelu row norm, float32, forward only, T·B = {}: one pass over S = X·Kᵀ against "
      "rowsum((X·G) ⊙ X) with G = KᵀK (both after S is computed; the Gram route adds its own "
      "products)\n",
      rows);
  std::cout << fmt::format("{:>5} {:>5} {:>12} {:>12} {:>8}\n", "d", "n", "from S ms", "Gram ms", "Gram/S");
  for (std::int64_t d : widths) {
    for (std::int64_t n : tokens) {
      torch::NoGradGuard no_grad;
      torch::manual_seed(0);
      torch::Tensor x = torch::randn({rows, d}), keys = torch::randn({n, d});
      torch::Tensor s = torch::matmul(x, keys.t());
      torch::Tensor from_s, from_gram;
      auto by_scores = [&] { from_s = s.square().sum(-1); };
      auto by_gram = [&] {
        torch::Tensor gram = torch::matmul(keys.t(), keys);  // (d, d)
        from_gram = (torch::matmul(x, gram) * x).sum(-1);
      };
      std::vector<double> t = tfw::bench::interleaved({by_scores, by_gram}, repeats);
      const double agree = ((from_s - from_gram).abs() / from_s).max().item<double>();
      std::cout << fmt::format("{:>5} {:>5} {:>12.2f} {:>12.2f} {:>8.2f}   (relative difference {:.1e})\n", d, n,
                               1e3 * t[0], 1e3 * t[1], t[1] / t[0], agree);
    }
  }

  {
    // A fixed threshold: large tensors are mapped and unmapped one by one (after parts 1 and 2,
    // whose timings it would change: every large tensor would then pay its page faults).
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    const std::int64_t d = 256, n = 4096, T = 1024;
    torch::manual_seed(0);
    tfw::Pattention layer(tfw::PattentionOptions(d, d, n));
    torch::Tensor x = torch::randn({1, T, d}, torch::requires_grad());
    torch::Tensor grad = torch::randn({1, T, d});
    auto one_step = [&](PattentionImplementation implementation) {
      use(implementation);
      layer->zero_grad();
      x.mutable_grad() = torch::Tensor();
      layer->forward(x).backward(grad);
      use(PattentionImplementation::fused);
    };
    one_step(PattentionImplementation::fused);  // warm up both, so that neither pays first-touch costs
    one_step(PattentionImplementation::reference);
    std::vector<double> fused, reference;
    for (int r = 0; r < 3; ++r) {
      fused.push_back(peak_mib([&] { one_step(PattentionImplementation::fused); }));
      reference.push_back(peak_mib([&] { one_step(PattentionImplementation::reference); }));
    }
    const double f = tfw::bench::median(fused), ref = tfw::bench::median(reference);
    std::cout << fmt::format(
        "\n3. Peak resident memory of one forward+backward, d {} n {} T {} float32 (one (T, n) "
        "matrix is {:.0f} MiB), median of 3: fused {:.1f} MiB, reference {:.1f} MiB, "
        "fused/reference {:.2f}\n",
        d, n, T, static_cast<double>(T * n * 4) / (1 << 20), f, ref, f / ref);
  }
  return 0;
}
