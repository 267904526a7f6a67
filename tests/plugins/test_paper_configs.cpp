// The shipped paper configurations: parameter counts equal docs/design/TOKENFORMER.md §4 exactly
// (V = 50304), the Transformer baselines match their Tokenformer sizes, the FLOPs formulas
// of §5 against hand-computed values, and built modules count what the formulas say.
#include <cmath>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/nn/model.h"
#include "tests/support.h"

namespace tfw {
namespace test_paper_configs {

struct TokenformerRow {
  const char* file;
  std::int64_t L, d, n_attn, n_ffn;
  const char* table;  // docs/design/TOKENFORMER.md §4, as printed there
};

// docs/design/TOKENFORMER.md §4 (paper Table 9 and the scaling ladder).
const std::vector<TokenformerRow> kTokenformerRows = {
    {"tokenformer-150m", 12, 768, 768, 3072, "151.9M"},
    {"tokenformer-450m", 24, 1024, 1024, 4096, "454.2M"},
    {"tokenformer-900m", 32, 1280, 1280, 5120, "903.3M"},
    {"tokenformer-1.5b", 40, 1536, 1536, 6144, "1587.2M"},
    {"tokenformer-scaling-124m", 12, 768, 576, 2304, "123.6M"},
    {"tokenformer-scaling-354m", 12, 768, 2140, 8560, "354.2M"},
    {"tokenformer-scaling-757m", 12, 768, 4850, 19400, "753.8M"},
    {"tokenformer-scaling-1.4b", 12, 768, 8620, 34480, "1.310B"},
};

std::string as_table_prints(std::int64_t parameters, const std::string& like) {
  if (like.back() == 'B') return fmt::format("{:.3f}B", parameters / 1e9);
  return fmt::format("{:.1f}M", parameters / 1e6);
}

TEST(PaperConfigs, TokenformerParameterCountsEqualTheTable) {
  const std::int64_t V = 50304;
  for (const TokenformerRow& row : kTokenformerRows) {
    SCOPED_TRACE(row.file);
    ModelConfig config = test::config_from_repo(std::string("experiments/paper/") + row.file + ".toml");
    ModelShape shape = config.spec->shape();
    EXPECT_EQ(shape.layers, row.L);
    EXPECT_EQ(shape.d, row.d);
    EXPECT_EQ(shape.vocab, V);
    const std::int64_t expected = V * row.d + row.L * 2 * row.d * (4 * row.n_attn + row.n_ffn) + 2 * row.d;
    EXPECT_EQ(config.spec->parameter_count(), expected);
    EXPECT_EQ(as_table_prints(config.spec->parameter_count(), row.table), row.table);
  }
}

TEST(PaperConfigs, TransformerBaselinesMatchTheirTokenformerSizes) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"transformer-150m", "tokenformer-150m"},
      {"transformer-450m", "tokenformer-450m"},
      {"transformer-900m", "tokenformer-900m"},
      {"transformer-1.5b", "tokenformer-1.5b"},
      {"transformer-scaling-124m", "tokenformer-scaling-124m"},
      {"transformer-scaling-354m", "tokenformer-scaling-354m"},
  };
  for (const auto& [transformer, tokenformer] : pairs) {
    SCOPED_TRACE(transformer);
    double a = test::config_from_repo("experiments/paper/" + transformer + ".toml").spec->parameter_count();
    double b = test::config_from_repo("experiments/paper/" + tokenformer + ".toml").spec->parameter_count();
    EXPECT_LT(std::fabs(a - b) / b, 0.002);
  }
  // GPT-2 shapes, tied, no biases: V·d + L·(12·d² + 4·d) + 2·d.
  EXPECT_EQ(test::config_from_repo("experiments/paper/transformer-scaling-124m.toml").spec->parameter_count(),
            123606528);
  EXPECT_EQ(test::config_from_repo("experiments/paper/transformer-scaling-1.4b.toml").spec->parameter_count(),
            50304LL * 1600 + 48LL * (12 * 1600 * 1600 + 4 * 1600) + 2 * 1600);
}

TEST(Flops, TokenformerScaling124mByHand) {
  FlopsPerToken f =
      test::config_from_repo("experiments/paper/tokenformer-scaling-124m.toml").spec->flops_per_token(1024);
  // N = 2·L·d·(4·576 + 2304) = 2·12·768·4608 = 84,934,656 -> 2N
  EXPECT_EQ(f.token_parameter, 169869312);
  EXPECT_EQ(f.token_token, 4LL * 12 * 768 * 1024);  // 37,748,736
  EXPECT_EQ(f.token_token, 37748736);
  EXPECT_EQ(f.embedding, 77266944);  // 2·50304·768
  EXPECT_EQ(f.forward(), 284884992);
  EXPECT_EQ(f.training(), 854654976);
  // Paper Table 8 unit: token-token FLOPs per sequence in 10^4·T² -> 4·L·d / 10^4 = 3.6864 ("3.6").
  EXPECT_DOUBLE_EQ(static_cast<double>(f.token_token) * 1024 / (1024.0 * 1024.0) / 1e4, 3.6864);
}

TEST(Flops, TokenformerGrowthKeepsTheTokenTokenTerm) {
  for (const char* file : {"tokenformer-scaling-354m", "tokenformer-scaling-757m", "tokenformer-scaling-1.4b"}) {
    FlopsPerToken f =
        test::config_from_repo(std::string("experiments/paper/") + file + ".toml").spec->flops_per_token(4096);
    EXPECT_EQ(f.token_token, 4LL * 12 * 768 * 4096) << file;
  }
  FlopsPerToken f354 =
      test::config_from_repo("experiments/paper/tokenformer-scaling-354m.toml").spec->flops_per_token(1);
  EXPECT_EQ(f354.token_parameter, 2LL * 2 * 12 * 768 * (4 * 2140 + 8560));  // 631,111,680
  EXPECT_EQ(f354.token_parameter, 631111680);
}

TEST(Flops, TransformerByHand) {
  // GPT-2 medium shape: N = 12·24·1024² = 301,989,888.
  FlopsPerToken f =
      test::config_from_repo("experiments/paper/transformer-scaling-354m.toml").spec->flops_per_token(2048);
  EXPECT_EQ(f.token_parameter, 603979776);
  EXPECT_EQ(f.token_token, 4LL * 24 * 1024 * 2048);  // 201,326,592
  EXPECT_EQ(f.embedding, 2LL * 50304 * 1024);
  // Attention width H·dh != d: the token-token term follows H·dh.
  ModelConfig config = test::config_from_text(R"(family = "transformer"
[model]
layers = 2
d = 10
heads = 3
head_dim = 4
d_ffn = 7
vocab = 5
)");
  FlopsPerToken g = config.spec->flops_per_token(8);
  EXPECT_EQ(g.token_parameter, 2 * 2 * (4 * 10 * 12 + 2 * 10 * 7));  // 2·L·(4·d·d_attn + 2·d·d_ffn) = 2480
  EXPECT_EQ(g.token_token, 4 * 2 * 12 * 8);                          // 768
  EXPECT_EQ(g.embedding, 100);
}

TEST(PaperConfigs, BuiltModulesCountWhatTheFormulasSay) {
  for (const char* file : {"tokenformer-scaling-124m", "transformer-scaling-124m"}) {
    SCOPED_TRACE(file);
    ModelConfig config = test::config_from_repo(std::string("experiments/paper/") + file + ".toml");
    auto model = test::plugins().family(config.family).build(*config.spec, 0);
    std::int64_t counted = 0;
    for (const auto& p : model->parameters()) counted += p.numel();
    EXPECT_EQ(counted, config.spec->parameter_count());
  }
}

}  // namespace test_paper_configs
}  // namespace tfw
