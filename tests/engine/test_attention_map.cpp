// Parameter-attention maps (engine/commands/attention_map.h): the map of layer 0's q projection equals
// Θ(S) computed by hand from the checkpoint's own weights (embedding -> parameter-free
// LayerNorm -> S = h·Kᵀ -> Θ), the token labels decode the input, and every error names the
// problem: a missing checkpoint, a Transformer (no parameter tokens), a layer or projection
// that does not exist, a parameter token out of range.
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/commands/attention_map.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/error.h"
#include "engine/nn/pattention.h"
#include "engine/config/run_config.h"
#include "engine/commands/sample.h"
#include "tests/support.h"

namespace tfw {
namespace test_attention_map {

namespace fs = std::filesystem;

std::string run_config_text(const std::string& family) {
  const std::string model = family == "tokenformer"
                                ? "layers = 2\nd = 16\nheads = 2\nn_attn = 12\nn_ffn = 20\nvocab = 256\nseq_len = 16\n"
                                : "layers = 2\nd = 16\nheads = 2\nd_ffn = 64\nvocab = 256\nseq_len = 16\n";
  return "family = \"" + family + "\"\n[model]\n" + model + "[data]\ncorpus = \"kjv\"\n[train]\nmax_steps = 1\n";
}

// A freshly initialised model of `family` saved as a checkpoint in `dir`; `edit` may change the
// model or the metadata first (a forger's file: the writer does not check what it is given).
std::string save_model(const std::string& family, const std::string& dir, std::shared_ptr<Model>* out = nullptr,
                       const std::function<void(Model&, CheckpointMeta&)>& edit = {}) {
  fs::remove_all(dir);
  RunConfig config =
      run_config_parse(test::plugins(), toml::parse(run_config_text(family), std::string("t.toml")), "t.toml");
  auto model = test::plugins().family(family).build(*config.model.spec, 7);
  CheckpointMeta meta;
  meta.config_toml = tfw::run_config_text(config);
  meta.val_loss = meta.best_val_loss = std::nan("");
  if (edit) {
    torch::NoGradGuard no_grad;
    edit(*model, meta);
  }
  const std::string path = checkpoint_save(dir, *model, nullptr, meta).path;
  if (out) *out = model;
  return path;
}

TEST(AttentionMap, EqualsThetaOfTheLayersScoresComputedByHand) {
  std::shared_ptr<Model> model;
  const std::string path = save_model("tokenformer", "/tmp/tfw-test-attention-map", &model);
  AttentionProbe probe(test::plugins(), path);
  EXPECT_EQ(probe.family(), "tokenformer");
  EXPECT_EQ(probe.layers(), 2);
  EXPECT_EQ(probe.parameter_tokens(0, "q"), 12);
  EXPECT_EQ(probe.parameter_tokens(1, "ffn"), 20);

  const std::string text = "Abc\n";
  AttentionMap map = probe.map(text, 0, "q");
  ASSERT_EQ(map.tokens, (std::vector<std::string>{"A", "b", "c", "\n"}));
  EXPECT_EQ(map.label, "layers.0.q");
  ASSERT_EQ(map.parameter_tokens, 12);
  ASSERT_EQ(map.scores.size(), 4u * 12u);
  EXPECT_FALSE(map.truncated);

  // By hand, in float64: x = E[ids]; h = LayerNorm(x) without affine (eps 1e-5); S = h·Kᵀ;
  // Θ = GELU(S · tau / ||S||₂) with tau = sqrt(12).
  std::map<std::string, torch::Tensor> params;
  for (const auto& item : model->named_parameters()) params[item.key()] = item.value().detach().to(torch::kFloat64);
  torch::Tensor ids = torch::tensor({65, 98, 99, 10}, torch::kInt64);
  torch::Tensor x = params.at("embedding").index_select(0, ids);  // (4, 16)
  torch::Tensor mean = x.mean(-1, true), var = (x - mean).square().mean(-1, true);
  torch::Tensor h = (x - mean) / (var + 1e-5).sqrt();
  torch::Tensor s = h.matmul(params.at("layers.0.q.keys").t());  // (4, 12)
  torch::Tensor norm = (s.square().sum(-1, true) + 1e-6).sqrt();
  torch::Tensor expected = torch::gelu(s * std::sqrt(12.0) / norm);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 12; ++j) EXPECT_NEAR(map.at(i, j), expected[i][j].item<double>(), 2e-5) << i << "," << j;
  }

  // Text past the model's 16-token context is cut, and says so.
  AttentionMap long_map = probe.map(std::string(40, 'x'), 1, "ffn");
  EXPECT_TRUE(long_map.truncated);
  EXPECT_EQ(long_map.tokens.size(), 16u);
  EXPECT_EQ(long_map.parameter_tokens, 20);
}

TEST(AttentionMap, TokenLabelsEscapeControlCharacters) {
  EXPECT_EQ(token_label("a\nb\t\x01"), "a\\nb\\t\\x01");
  EXPECT_EQ(token_label(" the"), " the");
}

TEST(AttentionMap, ErrorsNameTheProblemAndTheFix) {
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              AttentionProbe(test::plugins(), "/tmp/tfw-test-attention-none/step-1.pt");
            }).find("checkpoint /tmp/tfw-test-attention-none/step-1.pt does not exist"),
            std::string::npos);
  const std::string transformer = save_model("transformer", "/tmp/tfw-test-attention-transformer");
  EXPECT_NE(message([&] {
              AttentionProbe(test::plugins(), transformer);
            }).find("holds a transformer model, which has no Pattention layers"),
            std::string::npos);
  const std::string path = save_model("tokenformer", "/tmp/tfw-test-attention-errors");
  AttentionProbe probe(test::plugins(), path);
  EXPECT_NE(message([&] { probe.map("abc", 2, "q"); }).find("layer 2 does not exist: the model has 2 layers"),
            std::string::npos);
  EXPECT_NE(message([&] { probe.map("abc", 0, "w"); }).find("unknown projection 'w'"), std::string::npos);
  EXPECT_NE(message([&] { probe.map("", 0, "q"); }).find("the text is empty"), std::string::npos);
  EXPECT_NE(message([&] { probe.top_contexts(0, "q", 12); }).find("parameter token 12 does not exist"),
            std::string::npos);
}

// Issue 50: a checkpoint whose stored config says d = 1,000,000 built that model (2.8 GB)
// before comparing it with the file's tensors. The config's parameter count is compared with the
// values the file stores first, so the forgery is refused without building anything.
TEST(AttentionMap, AStoredConfigLargerThanItsWeightsIsRefusedBeforeAnyModelIsBuilt) {
  const std::string dir = "/tmp/tfw-test-forged-config";
  fs::remove_all(dir);
  RunConfig small =
      run_config_parse(test::plugins(), toml::parse(run_config_text("tokenformer"), std::string("t.toml")), "t.toml");
  auto model = test::plugins().family("tokenformer").build(*small.model.spec, 7);
  std::string forged = run_config_text("tokenformer");
  forged.replace(forged.find("d = 16"), 6, "d = 1000000");
  const RunConfig huge = run_config_parse(test::plugins(), toml::parse(forged, std::string("f.toml")), "f.toml");
  CheckpointMeta meta;
  meta.config_toml = tfw::run_config_text(huge);
  meta.val_loss = meta.best_val_loss = std::nan("");
  const std::string path = checkpoint_save(dir, *model, nullptr, meta).path;
  try {
    AttentionProbe probe(test::plugins(), path);
    ADD_FAILURE() << "the forged checkpoint was opened";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("its config describes a model of"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the config does not fit its weights"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// Issue 50: a checkpoint whose step was -5 rewrote its run's stored steps, and one whose
// inherited_flops was "inf" was stored, then refused in the run's bundle. Counters are refused
// as the metadata is read.
TEST(AttentionMap, NegativeOrInfiniteCountersInACheckpointAreRefused) {
  for (const char* field : {"step", "inherited_flops", "tokens"}) {
    SCOPED_TRACE(field);
    const std::string dir = std::string("/tmp/tfw-test-counter-") + field;
    const std::string path = save_model("tokenformer", dir, nullptr, [&](Model&, CheckpointMeta& meta) {
      if (std::string(field) == "step") meta.step = -5;
      if (std::string(field) == "tokens") meta.tokens = -1;
      if (std::string(field) == "inherited_flops") meta.inherited_flops = std::numeric_limits<double>::infinity();
    });
    try {
      checkpoint_read_meta(path);
      ADD_FAILURE() << "read back";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("metadata '") + field + "' is"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not a count >= 0"), std::string::npos) << e.what();
    }
    fs::remove_all(dir);
  }
}

// Issue 50 (15): `tfw sample` of a checkpoint whose weights are NaN ended in torch's own error
// (exit 1). It is the checkpoint's problem, said as such: a UsageError (exit 2) naming it.
TEST(AttentionMap, SamplingACheckpointWithNaNWeightsIsAClearError) {
  const std::string dir = "/tmp/tfw-test-sample-nan";
  SampleRequest request;
  request.checkpoint = save_model("tokenformer", dir, nullptr, [](Model& model, CheckpointMeta& meta) {
    model.parameters().front().fill_(std::nan(""));
    meta.step = 1;
  });
  request.home = dir;
  request.prompt = "In the beginning";
  request.tokens = 3;
  try {
    sample_checkpoint(test::plugins(), request, [](const std::string&) {});
    ADD_FAILURE() << "sampled";
  } catch (const UsageError& e) {
    EXPECT_NE(
        std::string(e.what()).find("its model gives scores that are not finite (NaN or infinite weights) at token 0"),
        std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// Issue 51: a checkpoint records ATen's CPU kernels, which a resume asks for again. The name
// is read back as written, and a forged one (not a name ATen gives) is refused as it is read.
TEST(AttentionMap, ACheckpointsKernelsAreReadBackAndAForgedNameIsRefused) {
  const std::string dir = "/tmp/tfw-test-checkpoint-kernels";
  for (const std::string& kernels :
       std::vector<std::string>{"AVX2", "", "AVX2; rm -rf /", "avx2", std::string(17, 'A')}) {
    SCOPED_TRACE(kernels);
    const std::string path =
        save_model("tokenformer", dir, nullptr, [&](Model&, CheckpointMeta& meta) { meta.cpu_capability = kernels; });
    if (kernels == "AVX2" || kernels.empty()) {
      EXPECT_EQ(checkpoint_read_meta(path).cpu_capability, kernels);
      continue;
    }
    try {
      checkpoint_read_meta(path);
      ADD_FAILURE() << "read back";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("metadata 'cpu_capability' is not a name of ATen's CPU kernels"),
                std::string::npos)
          << e.what();
    }
  }
  fs::remove_all(dir);
}

}  // namespace test_attention_map
}  // namespace tfw
