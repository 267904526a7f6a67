// Which BLAS should the fused attention's direct products (engine/kernels/cpu/attention_fused.cpp) call?
// The products of one training step's attention at the quickstart's shapes (B 16, H 4, T 128,
// dh 32: per head S = Q·Kᵀ, O = P·V, and the backward's dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K,
// dK = dSᵀ·Q), float32, column-major sgemm_, each head single-threaded inside an OpenMP
// parallel region over the heads, as the operator runs them. Two BLAS side by side in one
// process, interleaved repetitions, median:
//   - the sgemm_ the engine binds to: the one libtorch_cpu exports (MKL in PyTorch's x86 wheels);
//   - OpenBLAS (libopenblas.so.0, dlopen'ed locally), when the machine has it.
// Usage: bench_blas [--repeats N] [--threads N]
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "engine/machine/runtime.h"

namespace {

using Sgemm = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                       const int*, const float*, const int*, const float*, float*, const int*);

struct Product {
  char ta, tb;
  int m, n, k;
};

double run(Sgemm sgemm, const std::vector<Product>& products, int heads, std::vector<std::vector<float>>& buffers) {
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
  for (int h = 0; h < heads; ++h) {
    std::vector<float>& buf = buffers[static_cast<std::size_t>(h)];
    float* a = buf.data();
    float* b = a + 128 * 128;
    float* c = b + 128 * 128;
    const float one = 1.0f, zero = 0.0f;
    for (const Product& p : products) {
      const int lda = p.ta == 'N' ? p.m : p.k, ldb = p.tb == 'N' ? p.k : p.n;
      sgemm(&p.ta, &p.tb, &p.m, &p.n, &p.k, &one, a, &lda, b, &ldb, &zero, c, &p.m);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 51, threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
  }
  tfw::runtime_init(threads);  // loads libtorch_cpu and sets torch's (and OpenMP's) threads
  const int T = 128, dh = 32, heads = 16 * 4;
  // Forward and backward of one head (column-major view of the row-major operator).
  const std::vector<Product> products = {
      {'T', 'N', T, T, dh},  // S = Q·Kᵀ
      {'N', 'N', T, dh, T},  // O = P·V
      {'T', 'N', T, dh, T},  // dV = Pᵀ·dO
      {'N', 'T', T, T, dh},  // dP = dO·Vᵀ
      {'N', 'N', T, dh, T},  // dQ = dS·K
      {'T', 'N', T, dh, T},  // dK = dSᵀ·Q
  };
  std::vector<std::pair<const char*, Sgemm>> blas;
  blas.emplace_back("libtorch_cpu's sgemm_ (MKL)", reinterpret_cast<Sgemm>(dlsym(RTLD_DEFAULT, "sgemm_")));
  if (void* openblas = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL)) {
    // OpenBLAS's own setter also sets OpenMP's thread count (one runtime in the process):
    // put torch's count back, so that the heads run in parallel as in the operator.
    if (auto set = reinterpret_cast<void (*)(int)>(dlsym(openblas, "openblas_set_num_threads"))) set(1);
    tfw::runtime_init(threads);
    blas.emplace_back("OpenBLAS sgemm_", reinterpret_cast<Sgemm>(dlsym(openblas, "sgemm_")));
  } else {
    std::printf("OpenBLAS: not installed here (libopenblas.so.0), measured MKL alone\n");
  }
  std::vector<std::vector<float>> buffers(heads, std::vector<float>(3 * 128 * 128));
  std::mt19937 gen(0);
  std::normal_distribution<float> normal;
  for (auto& b : buffers) std::generate(b.begin(), b.end(), [&] { return normal(gen); });
  std::vector<std::vector<double>> times(blas.size());
  for (std::size_t i = 0; i < blas.size(); ++i) run(blas[i].second, products, heads, buffers);  // warm
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < blas.size(); ++i) times[i].push_back(run(blas[i].second, products, heads, buffers));
  }
  double flops = 0;
  for (const Product& p : products) flops += 2.0 * p.m * p.n * p.k;
  flops *= heads;
  std::printf(
      "attention products of one step (B16 H4 T128 dh32, %d heads x %zu sgemm), %d OpenMP threads, median of %d "
      "interleaved\n",
      heads, products.size(), omp_get_max_threads(), repeats);
  double first = 0;
  for (std::size_t i = 0; i < blas.size(); ++i) {
    std::sort(times[i].begin(), times[i].end());
    const double median = times[i][times[i].size() / 2];
    if (i == 0) first = median;
    std::printf("  %-30s %8.3f ms  %6.1f GFLOP/s  %5.2fx of the first\n", blas[i].first, 1e3 * median,
                flops / median / 1e9, median / first);
  }
  return 0;
}
