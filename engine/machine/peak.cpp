#include "engine/machine/peak.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "engine/machine/cpu_load.h"

namespace tfw {

namespace {

double measure() {
  torch::NoGradGuard no_grad;
  const std::int64_t n = 1024;
  torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n}), c = torch::empty({n, n});
  torch::matmul_out(c, a, b);  // warm up
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) torch::matmul_out(c, a, b);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 4 * 2.0 * n * n * n / seconds);
  }
  return best;
}

// Dense matrix products on a CUDA device, timed between device synchronisations.
double measure_cuda(const DeviceName& device, Precision precision) {
  torch::NoGradGuard no_grad;
  const std::int64_t n = 8192;
  const auto options = torch::TensorOptions()
                           .device(torch::Device(device.text()))
                           .dtype(precision == Precision::bf16 ? torch::kBFloat16 : torch::kFloat32);
  torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options), c = torch::empty({n, n}, options);
  for (int i = 0; i < 3; ++i) torch::matmul_out(c, a, b);
  torch::cuda::synchronize();
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) torch::matmul_out(c, a, b);
    torch::cuda::synchronize();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 10 * 2.0 * n * n * n / seconds);
  }
  return best;
}

struct Probe {
  double flops = 0;
  bool cacheable = true;  // false: measured beside busy processes, not used (peak_flops_resolve gives 0)
};

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// The peak cached in TFW_HOME/machine.toml under `key` (host and thread count, or host, device
// and precision), or else `probe()`'s, cached when it is cacheable. A damaged cache is
// measured again.
double cached_peak(const std::string& home, const std::string& key, const std::function<Probe()>& probe) {
  const std::string path = home + "/machine.toml";
  toml::table table;
  try {
    if (std::filesystem::exists(path)) table = toml::parse_file(path);
  } catch (const toml::parse_error&) {
    table = toml::table{};
  }
  if (auto cached = table["peak_flops"][key].value<double>()) return *cached;
  const Probe measured = probe();
  // A probe beside busy processes reads low, and an MFU over it reads high (223% was printed):
  // it is not used. 0 means "not measured", and MFU is then reported as not measured.
  if (!measured.cacheable) return 0;
  if (!table.contains("peak_flops")) table.insert("peak_flops", toml::table{});
  table["peak_flops"].as_table()->insert_or_assign(key, measured.flops);
  std::filesystem::create_directories(home);
  std::ofstream(path) << "# tfw: measured matmul peak FLOP/s (for MFU), per host and thread count or device\n"
                      << table << "\n";
  return measured.flops;
}

}  // namespace

double peak_flops_resolve(const std::string& home, double configured, const DeviceName& device, Precision precision) {
  if (configured > 0 || !device.is_cuda()) return peak_flops_resolve(home, configured);
  const std::string key =  // "cuda" is cached as cuda:0
      fmt::format("{}-cuda:{}-{}", host_name(), std::max(device.index, 0), precision_name(precision));
  return cached_peak(home, key, [&] { return Probe{measure_cuda(device, precision), true}; });
}

double peak_flops_resolve(const std::string& home, double configured) {
  if (configured > 0) return configured;
  const std::string key = fmt::format("{}-threads{}", host_name(), torch::get_num_threads());
  return cached_peak(home, key, [] {
    // A probe beside other busy processes reads low (seen: 60 GFLOP/s beside a training, where
    // this machine's idle figure is 203; 26 GFLOP/s gave an MFU of 223%). So a contended probe
    // is neither cached nor used: the run's MFU is "not measured", and the next run probes again.
    const LoadMeter load;
    const double peak = measure();
    return Probe{peak, !load_contended(load.other_cpu_share(), torch::get_num_threads())};
  });
}

}  // namespace tfw
