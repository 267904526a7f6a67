// The fused AdamW (engine/train/optim.h) against torch::optim::AdamW: 200 steps of a real
// model's parameter groups from the same gradients, continuing from AdamW's own state, and a
// skipped update that changes nothing; the device-side clipping against the read-back one.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/train/optim.h"
#include "tests/engine/trainer_test_support.h"
#include "tests/support.h"

namespace tfw {
namespace test_optim {

using namespace trainer_test;

// The largest |a - b| over every parameter of two models.
double largest_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, (a[i] - b[i]).abs().max().item<double>());
  return largest;
}

// Two copies of the smallest Tokenformer, each with AdamW's groups (weight decay on the
// matrices, none on the vectors), and gradients drawn from one seeded generator per step.
struct Twins {
  std::shared_ptr<Model> a, b;
  std::unique_ptr<torch::optim::AdamW> adamw_a, adamw_b;
  TrainConfig train;

  Twins() {
    RunConfig config = config_of(kTokenformer, {"train.max_steps=1", "train.weight_decay=0.1", "train.lr=1e-3"});
    train = config.train;
    a = test::plugins().family("tokenformer").build(*config.model.spec, 7);
    b = test::plugins().family("tokenformer").build(*config.model.spec, 7);
    adamw_a = std::make_unique<torch::optim::AdamW>(optimizer_groups(*a, train), torch::optim::AdamWOptions(train.lr));
    adamw_b = std::make_unique<torch::optim::AdamW>(optimizer_groups(*b, train), torch::optim::AdamWOptions(train.lr));
  }
  // Both models' gradients for step `step`: the same values, of a gradient's size.
  void gradients(int step) {
    torch::manual_seed(1000 + step);
    std::vector<torch::Tensor> pa = a->parameters(), pb = b->parameters();
    for (std::size_t i = 0; i < pa.size(); ++i) {
      torch::Tensor g = torch::randn_like(pa[i]) * 0.01;
      pa[i].mutable_grad() = g.clone();
      pb[i].mutable_grad() = g.clone();
    }
  }
  static void set_lr(torch::optim::AdamW& optimizer, double lr) {
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
};

TEST(Optim, FusedAdamWMatchesTorchsAdamWOver200Steps) {
  Twins twins;
  FusedAdamW fused(*twins.adamw_b);
  for (int step = 1; step <= 200; ++step) {
    const double lr = 1e-3 * (1.0 - 0.004 * step);  // a schedule: the rate changes every step
    twins.gradients(step);
    Twins::set_lr(*twins.adamw_a, lr);
    twins.adamw_a->step();
    fused.step(lr);
  }
  const double moved = largest_difference(
      twins.a->parameters(),
      test::plugins().family("tokenformer").build(*config_of(kTokenformer).model.spec, 7)->parameters());
  EXPECT_GT(moved, 0.01) << "the parameters hardly moved, so the comparison would say little";
  EXPECT_LT(largest_difference(twins.a->parameters(), twins.b->parameters()), 1e-6);
  // The state: moments within rounding, and the step counts written back exactly.
  fused.steps_write_back();
  for (const torch::Tensor& p : twins.b->parameters()) {
    const auto& s = static_cast<torch::optim::AdamWParamState&>(*twins.adamw_b->state().at(p.unsafeGetTensorImpl()));
    EXPECT_EQ(s.step(), 200);
  }
}

// A run resumed from a checkpoint continues from torch::optim::AdamW's state (its step count
// and moments); the fused update picks it up from there.
TEST(Optim, FusedAdamWContinuesFromAdamWsOwnState) {
  Twins twins;
  for (int step = 1; step <= 50; ++step) {  // both with AdamW's own update
    twins.gradients(step);
    twins.adamw_a->step();
    twins.adamw_b->step();
  }
  ASSERT_EQ(largest_difference(twins.a->parameters(), twins.b->parameters()), 0.0);
  FusedAdamW fused(*twins.adamw_b);
  for (int step = 51; step <= 100; ++step) {
    twins.gradients(step);
    twins.adamw_a->step();
    fused.step(twins.train.lr);
  }
  EXPECT_LT(largest_difference(twins.a->parameters(), twins.b->parameters()), 1e-6);
  fused.steps_write_back();
  const torch::Tensor p = twins.b->parameters().front();
  EXPECT_EQ(static_cast<torch::optim::AdamWParamState&>(*twins.adamw_b->state().at(p.unsafeGetTensorImpl())).step(),
            100);
}

// A skipped update (the kernel's found_inf = 1) leaves parameters, moments and step counts as
// they were, bit for bit; a 0 updates as if no flag were given.
TEST(Optim, FusedAdamWSkipsAnUpdateOnTheDevicesFlag) {
  Twins twins;
  FusedAdamW fused_a(*twins.adamw_a), fused_b(*twins.adamw_b);
  for (int step = 1; step <= 3; ++step) {
    twins.gradients(step);
    fused_a.step(1e-3);
    fused_b.step(1e-3, torch::zeros({}, torch::kFloat32));
  }
  ASSERT_EQ(largest_difference(twins.a->parameters(), twins.b->parameters()), 0.0);
  std::vector<torch::Tensor> before;
  for (const torch::Tensor& p : twins.b->parameters()) before.push_back(p.detach().clone());
  const torch::Tensor first = twins.b->parameters().front();
  const torch::Tensor moment =
      static_cast<torch::optim::AdamWParamState&>(*twins.adamw_b->state().at(first.unsafeGetTensorImpl()))
          .exp_avg()
          .clone();
  twins.gradients(4);
  fused_b.step(1e-3, torch::ones({}, torch::kFloat32));
  EXPECT_EQ(largest_difference(twins.b->parameters(), before), 0.0);
  EXPECT_TRUE(torch::equal(
      static_cast<torch::optim::AdamWParamState&>(*twins.adamw_b->state().at(first.unsafeGetTensorImpl())).exp_avg(),
      moment));
  fused_b.steps_write_back();
  EXPECT_EQ(static_cast<torch::optim::AdamWParamState&>(*twins.adamw_b->state().at(first.unsafeGetTensorImpl())).step(),
            3);
  // The next update is step 4 for both: the skipped one left no trace.
  fused_a.step(1e-3);
  fused_b.step(1e-3);
  EXPECT_EQ(largest_difference(twins.a->parameters(), twins.b->parameters()), 0.0);
}

// The norm stays on the device until asked for, and equals the read-back clipping's.
TEST(Optim, ClippingOnTheDeviceEqualsClippingWithTheNormReadBack) {
  torch::Tensor a = torch::zeros({2}, torch::kFloat64).requires_grad_(true);
  torch::Tensor b = torch::zeros({1}, torch::kFloat64).requires_grad_(true);
  a.mutable_grad() = torch::tensor({300.0, 400.0}, torch::kFloat64);
  b.mutable_grad() = torch::tensor({1200.0}, torch::kFloat64);
  const torch::Tensor norm = gradients_clip_on_device({a, b}, 13.0);
  EXPECT_EQ(norm.dim(), 0);
  EXPECT_DOUBLE_EQ(norm.item<double>(), 1300.0);
  EXPECT_DOUBLE_EQ(a.grad()[1].item<double>(), 400.0 * 13.0 / (1300.0 + 1e-6));
}

}  // namespace test_optim
}  // namespace tfw
