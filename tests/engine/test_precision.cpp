// Precision and device (issue 16): bf16 autocast runs a model's products in bf16 while its
// weights, gradients, Pattention normalisation and loss stay float32; the guard restores
// autocast when it ends; train.device names only devices this LibTorch has.
#include <dlfcn.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include "engine/machine/device.h"
#include "engine/machine/runtime.h"
#include "engine/core/error.h"
#include "engine/nn/pattention.h"
#include "engine/kernels/cpu/pattention_kernels.h"
#include "engine/nn/pattention_fused.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/train/window_loss.h"
#include "tests/cli/run_command.h"
#include "tests/support.h"

namespace tfw {
namespace test_precision {

std::shared_ptr<Model> tiny_tokenformer() {
  const ModelConfig config = test::config_from_text(test::TinyModel{"tokenformer", 32, 4, 64, 16, 32, 16}.toml());
  return test::plugins().family(config.family).build(*config.spec, 3);
}

TEST(Precision, Bf16AutocastRunsTheProductsInBf16AndKeepsWeightsAndGradientsFloat32) {
  auto model = tiny_tokenformer();
  const torch::Tensor tokens = torch::randint(0, 64, {2, 9}, torch::kInt64);
  torch::Tensor logits;
  std::map<std::string, torch::Tensor> scores;
  {
    const AutocastGuard autocast(Precision::bf16, torch::kCPU);
    EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
    ScoreCapture capture;  // every Pattention
    logits = model->forward(tokens.narrow(1, 0, 8));
    scores = capture.scores();
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));  // the guard restores the state it found
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  ASSERT_FALSE(scores.empty());
  for (const auto& [label, a] : scores) {  // Θ written as bf16 by the fused kernels, float32 elsewhere
    EXPECT_EQ(a.scalar_type(), pattention_fused_vectorised() ? torch::kBFloat16 : torch::kFloat32) << label;
  }

  // The loss is float32 and its gradients reach float32 master weights.
  const torch::Tensor loss = loss_of(*model, tokens, 8, 64, Precision::bf16);
  EXPECT_EQ(loss.scalar_type(), torch::kFloat32);
  loss.backward();
  for (const auto& p : model->named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), torch::kFloat32) << p.key();
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_EQ(p.value().grad().scalar_type(), torch::kFloat32) << p.key();
  }

  // Close to the float32 loss (bf16 keeps 8 bits of mantissa), but not equal to it.
  const double fp32 = loss_of(*model, tokens, 8, 64, Precision::fp32).item<double>();
  EXPECT_NEAR(loss.item<double>(), fp32, 0.02 * fp32);
  EXPECT_NE(loss.item<double>(), fp32);
}

TEST(Precision, Bf16ScoresAreNormalisedInFloat32AndRoundedOnce) {
  // On bf16 scores the fused operator computes in float32 and rounds its output and the
  // gradient once: bit for bit what the float32 kernel gives on the widened scores, rounded.
  torch::manual_seed(5);
  for (PattentionNorm norm :
       {PattentionNorm::l2_gelu, PattentionNorm::gelu_l2, PattentionNorm::gelu_l1, PattentionNorm::softmax}) {
    SCOPED_TRACE(pattention_norm_name(norm));
    const torch::Tensor s16 = (torch::randn({3, 7, 203}) * 2).to(torch::kBFloat16).requires_grad_(true);
    const torch::Tensor da16 = torch::randn({3, 7, 203}).to(torch::kBFloat16);
    const torch::Tensor s32 = s16.detach().to(torch::kFloat32).requires_grad_(true);
    const torch::Tensor a16 = pattention_scores_normalise_fused(s16, norm, 14.0, 1e-6);
    const torch::Tensor a32 = pattention_scores_normalise_fused(s32, norm, 14.0, 1e-6);
    a16.backward(da16);
    a32.backward(da16.to(torch::kFloat32));
    if (pattention_fused_vectorised()) {
      EXPECT_EQ(a16.scalar_type(), torch::kBFloat16);
      EXPECT_TRUE(torch::equal(a16, a32.to(torch::kBFloat16)));
      if (norm != PattentionNorm::softmax) {
        EXPECT_TRUE(torch::equal(s16.grad(), s32.grad().to(torch::kBFloat16)));
      } else {  // softmax's backward reads the saved output, which in bf16 is the rounded one
        const torch::Tensor a = a16.detach().to(torch::kFloat32), da = da16.to(torch::kFloat32);
        const torch::Tensor expected = a * (da - (da * a).sum(-1, true) / 14.0);
        EXPECT_LT((s16.grad().to(torch::kFloat32) - expected).abs().max().item<double>(),
                  1e-2 * expected.abs().max().item<double>());
      }
    } else {
      EXPECT_TRUE(torch::equal(a16, a32));
    }
  }
}

TEST(Precision, Fp32GuardChangesNothing) {
  auto model = tiny_tokenformer();
  const torch::Tensor tokens = torch::randint(0, 64, {2, 9}, torch::kInt64);
  const double plain = loss_of(*model, tokens, 8, 64).item<double>();
  {
    const AutocastGuard autocast(Precision::fp32, torch::kCPU);
    EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  }
  EXPECT_EQ(loss_of(*model, tokens, 8, 64, Precision::fp32).item<double>(), plain);
}

TEST(Device, NamesOnlyDevicesThisLibTorchHas) {
  EXPECT_EQ(device_resolve("cpu"), torch::Device(torch::kCPU));
  EXPECT_THROW(device_resolve("gpu"), UsageError);
  EXPECT_THROW(device_resolve("cuda:x"), UsageError);
  if (!cuda_available()) {
    try {
      device_resolve("cuda");
      FAIL() << "cuda resolved on a machine without a CUDA device";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("there is no CUDA device on this machine"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(TORCH_VERSION), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(precision_parse("bf16"), Precision::bf16);
  EXPECT_THROW(precision_parse("fp16"), UsageError);
}

// The binary is built against PyTorch's CUDA wheel (issue 32), so a GPU is used where there is
// one. Its CUDA half (libtorch_cuda.so) is loaded as the engine loads where there is an NVIDIA
// driver, and is not even mapped where there is none (runtime.h): here, without one, no device.
TEST(Device, BuiltWithCudaReportsDevices) {
  EXPECT_TRUE(torch_has_cuda()) << build_description();
  EXPECT_FALSE(std::string(torch_cuda_version()).empty());
  EXPECT_NE(build_description().find(std::string("CUDA ") + torch_cuda_version()), std::string::npos);
  std::ifstream maps("/proc/self/maps");
  const std::string mapped((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  EXPECT_EQ(mapped.find("libtorch_cuda.so") != std::string::npos, cuda_load().wanted) << build_description();
  EXPECT_EQ(cuda_load().loaded, cuda_load().wanted) << cuda_load().error;
  if (!cuda_available()) {
    EXPECT_EQ(cuda_device_count(), 0);
    EXPECT_NE(build_description().find("no CUDA device"), std::string::npos) << build_description();
  } else {
    EXPECT_GT(cuda_device_count(), 0);
  }
}

// Loaded after LibTorch's CPU half, by dlopen, the CUDA half still registers its hooks with
// LibTorch: TFW_LOAD_CUDA=1 loads it on this machine too (without a driver: no device, and no
// "(no NVIDIA driver)" note), and TFW_LOAD_CUDA=0 never loads it.
TEST(Device, TheCudaHalfLoadsWhereItCanBeUsedOrWhenAsked) {
  const std::string cuda = std::string("CUDA ") + torch_cuda_version();
  const test::Result forced = test::capture("TFW_LOAD_CUDA=1 " TFW_BINARY " --version");
  ASSERT_EQ(forced.code, 0) << forced.output;
  EXPECT_NE(forced.out.find(cuda), std::string::npos) << forced.out;
  EXPECT_EQ(forced.out.find("not loaded"), std::string::npos) << forced.out;
  EXPECT_EQ(forced.out.find("(no NVIDIA driver)"), std::string::npos) << forced.out;
  const test::Result never = test::capture("TFW_LOAD_CUDA=0 " TFW_BINARY " --version");
  ASSERT_EQ(never.code, 0) << never.output;
  EXPECT_NE(never.out.find(cuda + ", no CUDA device (no NVIDIA driver)"), std::string::npos) << never.out;
  const test::Result plain = test::capture("env -u TFW_LOAD_CUDA " TFW_BINARY " --version");
  ASSERT_EQ(plain.code, 0) << plain.output;
  EXPECT_EQ(plain.out.find("(no NVIDIA driver)") != std::string::npos, !cuda_driver_present()) << plain.out;
}

// PyTorch's wheel exports its own copies of some libstdc++ functions, and its
// std::filesystem::remove_all crashes when called from this build (a jump to address 0). The
// link puts the system's libstdc++ first (CMakeLists.txt), so tfw's calls reach the real one.
TEST(Build, LibstdcxxServesTheStandardLibrary) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(remove_all), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  EXPECT_NE(std::string(info.dli_fname).find("libstdc++"), std::string::npos) << info.dli_fname;
  // And it works: a folder with a file in it is removed.
  const auto dir = std::filesystem::temp_directory_path() / "tfw-remove-all-test";
  std::filesystem::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "file") << "x";
  EXPECT_EQ(std::filesystem::remove_all(dir), 3u);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace test_precision
}  // namespace tfw
