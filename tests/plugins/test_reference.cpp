// Reference-output test (docs/design/STYLE.md 4): logits, loss and every parameter gradient of both
// families in float64 against tests/reference/model_reference.py, an independent Python
// implementation of docs/design/TOKENFORMER.md run on the venv's PyPI torch.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/nn/model.h"
#include "tests/support.h"

namespace tfw {
namespace test_reference {

std::vector<std::vector<std::int64_t>> to_rows(const torch::Tensor& t) {
  std::vector<std::vector<std::int64_t>> rows;
  for (std::int64_t b = 0; b < t.size(0); ++b) {
    rows.emplace_back(t[b].data_ptr<std::int64_t>(), t[b].data_ptr<std::int64_t>() + t.size(1));
  }
  return rows;
}

// One model of `config_text` in float64 with its inputs, and where its reference is written.
struct Case {
  std::string label, dir;
  std::shared_ptr<Model> model;
  torch::Tensor ids, targets;
  std::int64_t vocab = 0;
};

Case reference_case(const std::string& label, const std::string& config_text) {
  ModelConfig config = test::config_from_text(config_text);
  Case c;
  c.label = label;
  c.dir = (std::filesystem::temp_directory_path() / ("tfw-reference-" + label)).string();
  c.model = test::plugins().family(config.family).build(*config.spec, 3);
  c.model->to(torch::kFloat64);
  torch::manual_seed(4);
  {  // Move norms off their 1/0 init so that every parameter matters.
    torch::NoGradGuard no_grad;
    for (auto& item : c.model->named_parameters()) {
      if (item.key().find("norm") != std::string::npos) item.value().add_(torch::randn_like(item.value()) * 0.1);
    }
  }
  c.vocab = config.spec->shape().vocab;
  c.ids = torch::randint(c.vocab, {2, 9}, torch::kInt64);
  c.targets = torch::randint(c.vocab, {2, 9}, torch::kInt64);
  const nlohmann::json meta = {{"family", config.family},
                               {"model", test::toml_to_json(config.spec->to_toml())},
                               {"ids", to_rows(c.ids)},
                               {"targets", to_rows(c.targets)}};
  test::python_reference_inputs(c.dir, meta, *c.model);
  return c;
}

// The cases' references in one Python process, then each model's forward and backward against its own.
void check_against_python(const std::vector<Case>& cases) {
  test::check_references("model_reference.py", cases, [](const Case& c, const std::vector<double>& reference) {
    torch::Tensor logits = c.model->forward(c.ids);
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, c.vocab}), c.targets.reshape({-1}));
    loss.backward();
    test::expect_matches_reference(reference, logits, loss, *c.model);
  });
}

const std::string kTokenformer =
    test::TinyModel{"tokenformer", 16, 2, 30, 12, 20}.toml("[model.init]\nkey_std = 0.3\nvalue_std = 0.3\n");
const std::string kTransformer = test::TinyModel{"transformer", 16, 2, 30}.toml("[model.init]\nstd = 0.2\n");

TEST(Reference, TokenformerMatchesIndependentPythonImplementation) {
  check_against_python(
      {reference_case("tokenformer", kTokenformer),
       reference_case("tokenformer-affine-gelu_l1", std::string(kTokenformer) +
                                                        "[model.layernorm]\naffine = true\n[model.pattention]\nnorm = "
                                                        "\"gelu_l1\"\n"),
       reference_case("tokenformer-softmax", std::string(kTokenformer) + "[model.pattention]\nnorm = \"softmax\"\n"),
       reference_case("tokenformer-gelu_l2", std::string(kTokenformer) + "[model.pattention]\nnorm = \"gelu_l2\"\n")});
}

TEST(Reference, TransformerMatchesIndependentPythonImplementation) {
  std::string wide = kTransformer;
  wide.insert(wide.find("[model.init]"), "head_dim = 12\nd_ffn = 24\n[model.linear]\nbias = true\n");
  check_against_python({reference_case("transformer", kTransformer), reference_case("transformer-bias-heads", wide)});
}

}  // namespace test_reference
}  // namespace tfw
