// The GPU suite (issue 35; ctest label `gpu`): what the CPU suites prove, again on a CUDA
// device. Every test needs one. Without one each prints "skipped: no CUDA device" and counts
// as skipped (GTEST_SKIP; ctest's SKIP_REGULAR_EXPRESSION), never as passed. Nothing here
// has run on a GPU unless a note in docs/results/performance.md says so, with the GPU.
//
// Tolerances: float64 on CUDA and on the CPU compute the same functions in another order
// (cuBLAS against OpenBLAS or oneDNN, another reduction tree): 1e-10 relative to the scale of
// the values. float32 and bf16 are stated at each check.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/nn/attention.h"
#include "engine/machine/device.h"
#include "engine/nn/model.h"
#include "engine/nn/pattention.h"
#include "engine/nn/pattention_fused.h"
#include "engine/train/lm_loss.h"
#include "tests/cli/run_command.h"
#include "tests/plugins/growth_cases.h"
#include "tests/support.h"

#define TFW_REQUIRE_CUDA()                                                   \
  do {                                                                       \
    if (!::tfw::cuda_available()) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (0)

namespace tfw {
namespace {

namespace fs = std::filesystem;

torch::Device cuda() { return torch::Device(torch::kCUDA, 0); }

double scale_of(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// Every parameter on the device asked for: growth must not leave one behind on the CPU.
void expect_all_on(torch::nn::Module& module, torch::Device device, const std::string& what) {
  for (const auto& p : module.named_parameters()) EXPECT_EQ(p.value().device(), device) << what << ": " << p.key();
  for (const auto& b : module.named_buffers()) EXPECT_EQ(b.value().device(), device) << what << ": " << b.key();
}

TEST(Gpu, BothFamiliesForwardAndEveryGradientMatchTheCpuInFloat64) {
  TFW_REQUIRE_CUDA();
  const std::vector<std::pair<std::string, std::string>> models = {
      {"tokenformer l2_gelu", test::tokenformer(12, 20, "l2_gelu")},
      {"tokenformer gelu_l1", test::tokenformer(12, 20, "gelu_l1")},
      {"tokenformer softmax", test::tokenformer(12, 20, "softmax")},
      {"tokenformer tau sqrt_n", test::tokenformer(12, 20, "l2_gelu", "sqrt_n")},
      {"transformer with biases", test::transformer(8, 2, 12, true)},
  };
  for (const bool kernels : {false, true})
    for (const auto& [name, text] : models) {
      SCOPED_TRACE(name + (kernels ? ", the fused CUDA kernels" : ", the composition"));
      pattention_set_cuda_fused(kernels);
      const ModelConfig config = test::config_from_text(text);
      const ModelFamily& family = test::plugins().family(config.family);
      std::shared_ptr<Model> cpu = family.build(*config.spec, 7), gpu = family.build(*config.spec, 7);
      cpu->to(torch::kFloat64);
      gpu->to(cuda(), torch::kFloat64);
      expect_all_on(*gpu, cuda(), name);
      torch::manual_seed(3);
      const torch::Tensor ids = torch::randint(30, {2, 16}, torch::kInt64);
      const torch::Tensor weights = torch::randn({2, 16, 30}, torch::kFloat64);
      const torch::Tensor a = cpu->forward(ids), b = gpu->forward(ids.to(cuda()));
      ASSERT_TRUE(b.is_cuda());
      EXPECT_LE(test::max_abs_diff(a, b.cpu()), 1e-10 * (1 + scale_of(a))) << "logits";
      (a * weights).sum().backward();
      (b * weights.to(cuda())).sum().backward();
      const auto cpu_parameters = cpu->named_parameters(), gpu_parameters = gpu->named_parameters();
      ASSERT_EQ(cpu_parameters.size(), gpu_parameters.size());
      for (std::size_t i = 0; i < cpu_parameters.size(); ++i) {
        const torch::Tensor& ga = cpu_parameters[i].value().grad();
        const torch::Tensor& gb = gpu_parameters[i].value().grad();
        ASSERT_TRUE(ga.defined() && gb.defined()) << cpu_parameters[i].key();
        EXPECT_LE(test::max_abs_diff(ga, gb.cpu()), 1e-10 * (1 + scale_of(ga)))
            << "gradient of " << cpu_parameters[i].key();
      }
    }
  pattention_set_cuda_fused(true);  // the default
}

// The same table as tests/plugins/test_growth.cpp, with the models and the growth on CUDA.
TEST(Gpu, EveryGrowthCaseIsExactOnCudaExactlyWhereDeclared) {
  TFW_REQUIRE_CUDA();
  for (const test::GrowthCase& c : test::growth_cases()) {
    for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
      SCOPED_TRACE(c.name + (dtype == torch::kFloat64 ? " float64" : " float32"));
      test::Grown g = test::grow(c, dtype, 1, cuda());
      expect_all_on(*g.grown, cuda(), "grown");
      torch::NoGradGuard no_grad;
      torch::manual_seed(1);
      const torch::Tensor ids = torch::randint(30, {2, 16}, torch::kInt64).to(cuda());
      const torch::Tensor a = g.small->forward(ids), b = g.grown->forward(ids);
      const double scale = scale_of(a), diff = test::max_abs_diff(a, b);
      if (c.exact) {
        EXPECT_LE(diff, dtype == torch::kFloat64 ? c.float64_tolerance : c.float32_tolerance * (1 + scale));
      } else {
        EXPECT_GT(diff, 1e-3);
      }
    }
  }
}

// at::scaled_dot_product_attention (flash or memory-efficient on CUDA) against our
// composition (softmax(q·kᵀ/sqrt(dh))·v), causal and bidirectional. float32: within 1e-5 of
// the scale; bf16 (the flash kernel): within 2e-2, against the composition on the same
// bf16 inputs computed in float32.
TEST(Gpu, ScaledDotProductAttentionMatchesTheComposition) {
  TFW_REQUIRE_CUDA();
  torch::manual_seed(5);
  const std::int64_t B = 2, H = 4, T = 96, dh = 32;
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    const torch::Tensor q = torch::randn({B, T, H * dh}).to(cuda(), dtype);
    const torch::Tensor k = torch::randn({B, T, H * dh}).to(cuda(), dtype);
    const torch::Tensor v = torch::randn({B, T, H * dh}).to(cuda(), dtype);
    const double tolerance = dtype == torch::kFloat32 ? 1e-5 : 2e-2;
    const RotaryTable table = rotary_table(T, 0, 10000.0, q.options().dtype(torch::kFloat32));
    const torch::Tensor fused_causal = multi_head_causal_attention(q, k, v, H, table, AttentionKernel::fused);
    const torch::Tensor manual_causal = multi_head_causal_attention(
        q.to(torch::kFloat32), k.to(torch::kFloat32), v.to(torch::kFloat32), H, table, AttentionKernel::manual);
    EXPECT_LE(test::max_abs_diff(fused_causal.to(torch::kFloat32), manual_causal),
              tolerance * (1 + scale_of(manual_causal)))
        << "causal " << dtype;
    const torch::Tensor fused_all = multi_head_attention(q, k, v, H, AttentionKernel::fused);
    const torch::Tensor manual_all = multi_head_attention(q.to(torch::kFloat32), k.to(torch::kFloat32),
                                                          v.to(torch::kFloat32), H, AttentionKernel::manual);
    EXPECT_LE(test::max_abs_diff(fused_all.to(torch::kFloat32), manual_all), tolerance * (1 + scale_of(manual_all)))
        << "bidirectional " << dtype;
  }
}

// On CUDA every choice (the composition, with the multiplier as a tensor and no tau.item()
// that would wait for the GPU; the fused CUDA kernels; TFW_PATTENTION=reference) gives the
// CPU's float64 values, for every norm and both tau modes.
TEST(Gpu, PattentionOnCudaIsTheCompositionForEveryNorm) {
  TFW_REQUIRE_CUDA();
  for (const char* tau : {"fixed", "sqrt_n"})
    for (const char* norm : {"l2_gelu", "gelu_l2", "gelu_l1", "softmax"}) {
      SCOPED_TRACE(fmt::format("{}, tau {}", norm, tau));
      PattentionOptions options(16, 8, 24);
      options.norm(pattention_norm_parse(norm));
      options.tau_mode(tau_mode_parse(tau));
      torch::manual_seed(9);
      Pattention cpu(options);
      cpu->to(torch::kFloat64);
      Pattention gpu(options);
      gpu->to(cuda(), torch::kFloat64);
      {
        torch::NoGradGuard no_grad;
        gpu->keys.copy_(cpu->keys);
        gpu->values.copy_(cpu->values);
      }
      const torch::Tensor x = torch::randn({3, 5, 16}, torch::kFloat64);
      const torch::Tensor expected = cpu->forward(x);
      for (auto implementation : {PattentionImplementation::fused, PattentionImplementation::reference})
        for (const bool kernels : {false, true}) {
          pattention_set_implementation(implementation);
          pattention_set_cuda_fused(kernels);
          const torch::Tensor y = gpu->forward(x.to(cuda()));
          EXPECT_LE(test::max_abs_diff(expected, y.cpu()), 1e-10 * (1 + scale_of(expected)))
              << (implementation == PattentionImplementation::reference ? "reference" : "fused")
              << (kernels ? ", CUDA kernels chosen" : "");
        }
      pattention_set_implementation(PattentionImplementation::fused);
      pattention_set_cuda_fused(true);  // the default
    }
}

// The fused CUDA kernels (engine/kernels/cuda/pattention_cuda.cu) against the composition on the CPU in
// float64, forward and the gradient of the scores, for every norm, for row lengths below one
// block's threads, between, and above (1, 5, 64, 777, 4099), in each type they take. The
// inputs are rounded to the type first, so only the arithmetic differs. Tolerances, relative
// to the largest value: float64 1e-12; float32 1e-5 (float32 sums and erff); bf16 1e-2 (the
// output rounded to 8 bits; computed in float32). A row of one token is checked in float64
// only: there the normalised output is ±m whatever s is, and its gradient is what is left of
// a cancellation (l2_gelu: m r du (1 − r² s²), with r² s² = 1 − eps/(s² + eps)) that float32
// cannot resolve in any order of operations, and 1 + erf(x) loses most of its digits in
// float32 for x < −3, which a lone token's L1/L2 norm then divides away (seen on an H100:
// float32 off by up to 1.4e-2 of the scale at n = 1, within 1e-5 from n = 5 on).
//
// Both kernels (pattention_cuda::Kernel): the rows read again in each pass, and the rows kept
// in registers (TFW_PATTENTION_CUDA=registers), at the sizes above and at even ones where the
// registers kernel runs (6: three pairs in a warp of 32 threads; 64; 778; 2,304, the 124M
// model's n_ffn; 8,192: four pairs a thread at 1,024 threads) and falls back (8,194); float64
// always falls back.
TEST(Gpu, FusedNormalisationKernelEqualsTheCompositionForEveryNormAndType) {
  TFW_REQUIRE_CUDA();
  const double eps = 1e-6;
  struct Restore {
    ~Restore() { pattention_set_cuda_registers(false); }
  } restore;
  for (const bool registers : {false, true})
    for (const char* norm_name : {"l2_gelu", "gelu_l2", "gelu_l1", "softmax"})
      for (const std::int64_t n : {1, 5, 6, 64, 777, 778, 2304, 4099, 8192, 8194})
        for (const auto type : {torch::kFloat64, torch::kFloat32, torch::kBFloat16}) {
          if (n == 1 && type != torch::kFloat64) continue;
          if ((n == 6 || n == 778 || n == 2304 || n == 8192 || n == 8194) && !registers) continue;
          pattention_set_cuda_registers(registers);
          SCOPED_TRACE(
              fmt::format("{}, n {}, {}, {}", norm_name, n, c10::toString(type), registers ? "registers" : "rows"));
          const PattentionNorm norm = pattention_norm_parse(norm_name);
          const bool l1 = norm == PattentionNorm::gelu_l1 || norm == PattentionNorm::softmax;
          const double m = l1 ? static_cast<double>(n) : std::sqrt(static_cast<double>(n));
          torch::manual_seed(n);
          // Scores of the size a trained layer sees, and an upstream gradient; rounded to the type.
          const torch::Tensor s64 = (3 * torch::randn({3, 13, n}, torch::kFloat64)).to(type).to(torch::kFloat64);
          const torch::Tensor da64 = torch::randn({3, 13, n}, torch::kFloat64).to(type).to(torch::kFloat64);
          const torch::Tensor s_cpu = s64.clone().requires_grad_(true);
          const torch::Tensor expected =
              pattention_scores_normalise(s_cpu, norm, torch::scalar_tensor(m, torch::kFloat64), eps);
          expected.backward(da64);
          const torch::Tensor s_gpu = s64.to(cuda(), type).requires_grad_(true);
          const torch::Tensor multiplier =
              torch::scalar_tensor(m, torch::TensorOptions().dtype(torch::kFloat64).device(cuda()));
          const torch::Tensor a = pattention_scores_normalise_fused(s_gpu, norm, multiplier, eps);
          ASSERT_TRUE(a.is_cuda());
          EXPECT_EQ(a.scalar_type(), type);
          a.backward(da64.to(cuda(), type));
          const double tolerance = type == torch::kFloat64 ? 1e-12 : type == torch::kFloat32 ? 1e-5 : 1e-2;
          EXPECT_LE(test::max_abs_diff(expected, a.to(torch::kCPU, torch::kFloat64)), tolerance * scale_of(expected))
              << "forward";
          const torch::Tensor& g = s_cpu.grad();
          EXPECT_LE(test::max_abs_diff(g, s_gpu.grad().to(torch::kCPU, torch::kFloat64)), tolerance * scale_of(g))
              << "gradient of the scores";
        }
  // Rows at an odd float's offset (a contiguous view 4 bytes into its storage): the registers
  // kernels read pairs as 8-byte accesses, so they leave these to the rows kernels, whose
  // output they equal bit for bit.
  const torch::Tensor storage = torch::randn({1 + 26 * 64}, torch::TensorOptions().device(cuda()));
  const torch::Tensor odd = storage.narrow(0, 1, 26 * 64).view({26, 64});
  const torch::Tensor multiplier =
      torch::scalar_tensor(8.0, torch::TensorOptions().dtype(torch::kFloat64).device(cuda()));
  ASSERT_TRUE(odd.is_contiguous());
  ASSERT_NE(reinterpret_cast<std::uintptr_t>(odd.data_ptr()) % 8, 0u);
  pattention_set_cuda_registers(true);
  const torch::Tensor by_registers = pattention_scores_normalise_fused(odd, PattentionNorm::l2_gelu, multiplier, eps);
  pattention_set_cuda_registers(false);
  const torch::Tensor by_rows = pattention_scores_normalise_fused(odd, PattentionNorm::l2_gelu, multiplier, eps);
  EXPECT_TRUE(torch::equal(by_registers, by_rows));
}

// ---- Training through the real binary ----

const std::string kSource = TFW_SOURCE_DIR;

test::Result tfw(const std::string& arguments) { return test::capture(TFW_BINARY " " + arguments); }

std::string fresh_home(const std::string& name) {
  const std::string home = (fs::temp_directory_path() / ("tfw-gpu-" + name + "-" + std::to_string(getpid()))).string();
  fs::remove_all(home);
  fs::create_directories(home);
  return home;
}

// The corpus of the trainings: gcide, or TFW_GPU_CORPUS (scripts/gpu-check sets a text file
// where gcide is not installed).
std::string corpus() {
  const char* chosen = std::getenv("TFW_GPU_CORPUS");
  return chosen != nullptr && *chosen != 0 ? chosen : "gcide";
}

// A small Tokenformer: enough steps that bf16 and fp32 settle.
std::string write_config(const std::string& home, const std::string& name, const std::string& train_extra) {
  const std::string path = home + "/" + name + ".toml";
  std::ofstream(path) << fmt::format(R"(family = "tokenformer"
[model]
layers = 2
d = 128
heads = 4
n_attn = 64
n_ffn = 256
vocab = 256
seq_len = 128
[data]
corpus = "{}"
[train]
batch_size = 16
lr = 2e-3
warmup_steps = 20
eval_every = 100
eval_batches = 20
checkpoint_every = 100
{}
)",
                                     corpus(), train_extra);
  return path;
}

nlohmann::json train_json(const std::string& arguments) {
  const test::Result out = tfw("train --json " + arguments);
  EXPECT_EQ(out.code, 0) << out.output;
  const std::size_t brace = out.out.find('{');
  if (out.code != 0 || brace == std::string::npos) return nlohmann::json::object();
  return nlohmann::json::parse(out.out.substr(brace), nullptr, false);
}

// The memory check counts the GPU's free memory on CUDA (cudaMemGetInfo), not the host's: a
// batch that needs about 1 TB is refused before anything is allocated, naming the device.
// The chunked loss on CUDA, with its softmax fused into one kernel (engine/kernels/cuda/loss_cuda.h) and
// as the composition, against float64 on the CPU from the same inputs (rounded to bf16 first
// where the products are bf16): the mean loss, and both gradients. 2,517 rows in chunks of
// 1,000 (two whole, one part), a vocabulary of 1,000 padded past 990: the padded rows of the
// embedding get no gradient at all. Tolerances: float32 1e-5 of the loss and 1e-4 of the
// gradients' scale; bf16 (the logits and the gradient d rounded to bf16 as autocast would)
// 2e-3 and 2e-2. The fused kernel and the composition agree more closely still: 1e-6 and 1e-5
// in float32, 1e-4 and 1e-3 in bf16.
TEST(Gpu, FusedLossSoftmaxMatchesFloat64AndTheComposition) {
  TFW_REQUIRE_CUDA();
  torch::manual_seed(7);
  const std::int64_t N = 2517, d = 64, V = 1000, valid = 990;
  const torch::Tensor hidden0 = torch::randn({N, d}, torch::kFloat32);
  const torch::Tensor embedding0 = 0.3 * torch::randn({V, d}, torch::kFloat32);
  const torch::Tensor targets = torch::randint(0, valid, {N}, torch::kLong);
  struct Result {
    double loss;
    torch::Tensor grad_hidden, grad_embedding;
  };
  auto run = [&](Precision precision, bool fused) {
    lm_loss_set_cuda_fused(fused);
    torch::Tensor h = hidden0.to(cuda()).requires_grad_(true), e = embedding0.to(cuda()).requires_grad_(true);
    torch::Tensor loss = cross_entropy_chunked(h, e, targets.to(cuda()), valid, 1000, precision);
    loss.backward();
    lm_loss_set_cuda_fused(true);
    return Result{loss.item<double>(), h.grad().cpu().to(torch::kFloat64), e.grad().cpu().to(torch::kFloat64)};
  };
  auto reference = [&](bool bf16) {
    auto in = [&](const torch::Tensor& t) { return (bf16 ? t.to(torch::kBFloat16) : t).to(torch::kFloat64); };
    torch::Tensor h = in(hidden0).requires_grad_(true), e = in(embedding0).requires_grad_(true);
    torch::Tensor loss = cross_entropy_plain(h.matmul(e.t()), targets, valid);
    loss.backward();
    return Result{loss.item<double>(), h.grad(), e.grad()};
  };
  for (const Precision precision : {Precision::fp32, Precision::bf16}) {
    const bool bf16 = precision == Precision::bf16;
    SCOPED_TRACE(bf16 ? "bf16" : "fp32");
    const Result fused = run(precision, true), composed = run(precision, false), exact = reference(bf16);
    const double loss_tol = bf16 ? 2e-3 : 1e-5, grad_tol = bf16 ? 2e-2 : 1e-4;
    EXPECT_NEAR(fused.loss, exact.loss, loss_tol * exact.loss);
    EXPECT_LE(scale_of(fused.grad_hidden - exact.grad_hidden), grad_tol * scale_of(exact.grad_hidden));
    EXPECT_LE(scale_of(fused.grad_embedding - exact.grad_embedding), grad_tol * scale_of(exact.grad_embedding));
    EXPECT_NEAR(fused.loss, composed.loss, (bf16 ? 1e-4 : 1e-6) * exact.loss);
    EXPECT_LE(scale_of(fused.grad_hidden - composed.grad_hidden), (bf16 ? 1e-3 : 1e-5) * scale_of(exact.grad_hidden));
    EXPECT_LE(scale_of(fused.grad_embedding - composed.grad_embedding),
              (bf16 ? 1e-3 : 1e-5) * scale_of(exact.grad_embedding));
    EXPECT_EQ(scale_of(fused.grad_embedding.narrow(0, valid, V - valid)), 0.0) << "a padded id got a gradient";
    std::cout << fmt::format(
        "fused loss on CUDA, {}: loss {:.8f} (float64 {:.8f}); |Δ grad| / scale: hidden {:.2e}, "
        "embedding {:.2e}\n",
        bf16 ? "bf16" : "fp32", fused.loss, exact.loss,
        scale_of(fused.grad_hidden - exact.grad_hidden) / scale_of(exact.grad_hidden),
        scale_of(fused.grad_embedding - exact.grad_embedding) / scale_of(exact.grad_embedding));
  }
}

// The rotary embedding's fused CUDA kernel against the composition (rotary_apply) on the same
// device: 2 × 37 positions from position 5, 3 heads of 16 dims, the first 8 rotated. float32:
// forward bit for bit, the gradient within 1e-6 of its scale (another order of the same
// products); bf16: forward the bf16 rounding of the composition's float32 result, bit for bit,
// and the gradient within 1e-2 of its scale.
TEST(Gpu, FusedRotaryEmbeddingIsTheComposition) {
  TFW_REQUIRE_CUDA();
  torch::manual_seed(3);
  const std::int64_t B = 2, T = 37, H = 3, dh = 16;
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(cuda());
  const RotaryTable table = rotary_table(T, rotary_dims(dh, 0.5), 10000.0, options, 5);
  ASSERT_EQ(table.dims, 8);
  const torch::Tensor x0 = torch::randn({B, T, H * dh}, options), upstream = torch::randn({B, H, T, dh}, options);
  for (const auto type : {torch::kFloat32, torch::kBFloat16}) {
    const bool bf16 = type == torch::kBFloat16;
    SCOPED_TRACE(bf16 ? "bf16" : "fp32");
    auto run = [&](bool fused) {
      rotary_set_cuda_fused(fused);
      torch::Tensor x = x0.to(type).requires_grad_(true);
      torch::Tensor y = rotary_heads(x, H, table);
      (y.to(torch::kFloat32) * upstream).sum().backward();
      rotary_set_cuda_fused(true);
      return std::make_pair(y.detach(), x.grad().to(torch::kFloat64));
    };
    const auto [fused, fused_grad] = run(true);
    const auto [composed, composed_grad] = run(false);
    EXPECT_EQ(fused.sizes(), composed.sizes());
    EXPECT_TRUE(torch::equal(fused, composed.to(type)))
        << "max |Δ| " << scale_of((fused.to(torch::kFloat64) - composed.to(torch::kFloat64)));
    EXPECT_LE(scale_of(fused_grad - composed_grad), (bf16 ? 1e-2 : 1e-6) * scale_of(composed_grad));
    // The dims past the rotated ones pass through untouched.
    EXPECT_TRUE(torch::equal(fused.narrow(-1, 8, 8), x0.to(type).view({B, T, H, dh}).transpose(1, 2).narrow(-1, 8, 8)));
  }
}

TEST(Gpu, TheMemoryCheckNamesTheGpusFreeMemory) {
  TFW_REQUIRE_CUDA();
  const std::string home = fresh_home("memory");
  const test::Result out = tfw("train " + write_config(home, "huge", "device = \"cuda\"") +
                               " --set train.batch_size=300000 --set train.max_steps=1 --home " + home);
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("GB of memory to train"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("GPU cuda:0 has"), std::string::npos) << out.output;
  fs::remove_all(home);
}

// bf16 (autocast, fp32 master weights) against fp32 on CUDA, 300 steps of a small Tokenformer:
// within 1% in validation loss, with the fused CUDA kernels (the default) and with the
// composition (TFW_PATTENTION_CUDA=composition).
TEST(Gpu, Bf16TrainingReachesFp32ValidationLossWithinOnePercent) {
  TFW_REQUIRE_CUDA();
  const std::string home = fresh_home("bf16");
  const nlohmann::json fp32 = train_json(
      write_config(home, "fp32", "max_steps = 300\ndevice = \"cuda\"\nprecision = \"fp32\"") + " --home " + home);
  const nlohmann::json bf16 = train_json(
      write_config(home, "bf16", "max_steps = 300\ndevice = \"cuda\"\nprecision = \"bf16\"") + " --home " + home);
  ASSERT_TRUE(fp32.contains("val_loss") && bf16.contains("val_loss")) << fp32.dump() << bf16.dump();
  const double a = fp32["val_loss"].get<double>(), b = bf16["val_loss"].get<double>();
  std::cout << fmt::format("validation loss after 300 steps on CUDA: fp32 {:.4f}, bf16 {:.4f} ({:+.2f}%)\n", a, b,
                           100 * (b - a) / a);
  EXPECT_LE(std::abs(b - a) / a, 0.01);
  const test::Result composed =
      test::capture("TFW_PATTENTION_CUDA=composition " TFW_BINARY " train --json " +
                    write_config(home, "bf16-composition", "max_steps = 300\ndevice = \"cuda\"\nprecision = \"bf16\"") +
                    " --home " + home);
  ASSERT_EQ(composed.code, 0) << composed.output;
  const double c = nlohmann::json::parse(composed.out.substr(composed.out.find('{')))["val_loss"].get<double>();
  std::cout << fmt::format("validation loss after 300 steps on CUDA, bf16 with the composition: {:.4f} ({:+.2f}%)\n", c,
                           100 * (c - a) / a);
  EXPECT_LE(std::abs(c - a) / a, 0.01);
  fs::remove_all(home);
}

// Checkpoints are device-free: a run trained on the GPU evaluates on the CPU to the loss it
// had on the GPU (float32 on two devices: within 1e-4 relative), and resumes on the CPU; a run
// begun on the CPU resumes on the GPU. Neither is bitwise the run that never moved (other
// kernels, other sums): each ends within 2% of it, and the figure is printed.
TEST(Gpu, CheckpointsMoveBetweenTheGpuAndTheCpu) {
  TFW_REQUIRE_CUDA();
  const std::string home = fresh_home("resume");
  const nlohmann::json gpu =
      train_json(write_config(home, "on-gpu", "max_steps = 100\ndevice = \"cuda\"") + " --home " + home);
  ASSERT_TRUE(gpu.contains("val_loss") && gpu.contains("run_dir")) << gpu.dump();
  const std::string run = gpu["run_dir"].get<std::string>();
  const test::Result eval = tfw("eval " + run + " --device cpu --json --no-record --home " + home);
  ASSERT_EQ(eval.code, 0) << eval.output;
  const nlohmann::json evaluated = nlohmann::json::parse(eval.out.substr(eval.out.find('{')));
  const double on_gpu = gpu["val_loss"].get<double>(), on_cpu = evaluated["results"][0]["loss"].get<double>();
  std::cout << fmt::format("validation loss of the GPU run: on the GPU {:.6f}, its checkpoint on the CPU {:.6f}\n",
                           on_gpu, on_cpu);
  EXPECT_LE(std::abs(on_cpu - on_gpu) / on_gpu, 1e-4);

  // GPU for 100 steps, then the CPU to 200; against 200 steps on the GPU.
  const nlohmann::json moved = train_json("--resume " + run +
                                          " --set train.device=cpu --set train.max_steps=200 "
                                          "--extend keep --home " +
                                          home);
  const nlohmann::json stayed =
      train_json(write_config(home, "stays-on-gpu", "max_steps = 200\nschedule_steps = 100\ndevice = \"cuda\"") +
                 " --home " + home);
  ASSERT_TRUE(moved.contains("val_loss") && stayed.contains("val_loss")) << moved.dump() << stayed.dump();
  const double m = moved["val_loss"].get<double>(), s = stayed["val_loss"].get<double>();
  std::cout << fmt::format("GPU then CPU: {:.6f}; GPU throughout: {:.6f} ({:+.3f}%)\n", m, s, 100 * (m - s) / s);
  EXPECT_LE(std::abs(m - s) / s, 0.02);

  // The CPU for 100 steps, then the GPU to 200.
  const nlohmann::json cpu = train_json(write_config(home, "on-cpu", "max_steps = 100") + " --home " + home);
  ASSERT_TRUE(cpu.contains("run_dir")) << cpu.dump();
  const nlohmann::json to_gpu =
      train_json("--resume " + cpu["run_dir"].get<std::string>() +
                 " --set train.device=cuda --set train.max_steps=200 --extend keep --home " + home);
  ASSERT_TRUE(to_gpu.contains("val_loss")) << to_gpu.dump();
  std::cout << fmt::format("CPU then GPU: {:.6f}\n", to_gpu["val_loss"].get<double>());
  EXPECT_LE(std::abs(to_gpu["val_loss"].get<double>() - s) / s, 0.02);
  fs::remove_all(home);
}

}  // namespace
}  // namespace tfw
