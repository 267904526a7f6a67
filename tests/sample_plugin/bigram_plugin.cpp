// A sample out-of-tree plugin, built by the test suite the way a plugin author would build
// one (docs/plugins.md): a `bigram` model family whose logits for token t depend only on
// token t (E[id] · W · Eᵀ). Its twin that claims another API version, which the registry must
// refuse without calling into it, is wrong_version_plugin.cpp.
#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/model.h"
#include "engine/plugin/plugin_api.h"

namespace {

struct BigramSpec : tfw::ModelSpec {
  std::int64_t d = 0, vocab = 0;
  std::string family() const override { return "bigram"; }
  tfw::ModelShape shape() const override { return {0, d, 1, vocab, 1}; }
  std::int64_t parameter_count() const override { return vocab * d + d * d; }
  std::int64_t embedding_parameter_count() const override { return vocab * d; }
  tfw::FlopsPerToken flops_per_token(std::int64_t T) const override { return {T, 2 * d * d, 0, 2 * vocab * d}; }
  toml::table to_toml() const override { return toml::table{{"d", d}, {"vocab", vocab}}; }
  std::string summary() const override { return fmt::format("d={} V={}", d, vocab); }
};

class BigramModel : public tfw::LanguageModel {
 public:
  explicit BigramModel(const BigramSpec& spec) {
    embedding_ = register_parameter("embedding", torch::randn({spec.vocab, spec.d}) * 0.02);
    mix_ = register_parameter("mix", torch::eye(spec.d));
  }
  torch::Tensor hidden(const torch::Tensor& ids) override {
    return torch::matmul(torch::embedding(embedding_, ids), mix_);  // (B, T, d)
  }
  torch::Tensor forward(const torch::Tensor& ids) override {
    return torch::matmul(hidden(ids), embedding_.t());  // (B, T, V)
  }
  torch::Tensor token_embedding() override { return embedding_; }

 private:
  torch::Tensor embedding_, mix_;
};

class BigramFamily : public tfw::ModelFamily {
 public:
  std::string name() const override { return "bigram"; }
  std::string version() const override { return "0.0.1-sample"; }
  std::string description() const override { return "sample out-of-tree plugin: a bigram LM"; }
  std::vector<std::string> growth_methods() const override { return {}; }
  std::shared_ptr<const tfw::ModelSpec> parse(tfw::ConfigTable& table) const override {
    auto spec = std::make_shared<BigramSpec>();
    spec->d = table.require_int("d");
    spec->vocab = table.require_int("vocab");
    return spec;
  }
  std::shared_ptr<tfw::Model> build(const tfw::ModelSpec& spec, std::uint64_t seed) const override {
    torch::manual_seed(seed);
    return std::make_shared<BigramModel>(dynamic_cast<const BigramSpec&>(spec));
  }
};

}  // namespace

TFW_PLUGIN(registrar) { registrar.add_model_family(std::make_shared<BigramFamily>()); }
