#include "tests/support.h"

#include "engine/runtime.h"

namespace tfw::test {

const Registry& plugins() {
  static Registry* instance = [] {
    runtime_init();
    auto* registry = new Registry();
    registry->load_folder(TFW_PLUGIN_DIR, "built-in");
    return registry;
  }();
  return *instance;
}

ModelConfig config_from_text(const std::string& text, const std::string& name) {
  toml::table table = toml::parse(text, name);
  return model_config_parse(plugins(), table, name);
}

std::string TinyModel::toml(const std::string& more) const {
  std::string text = "family = \"" + family + "\"\n[model]\nlayers = 2\nd = " + std::to_string(d) +
                     "\nheads = " + std::to_string(heads) + "\nvocab = " + std::to_string(vocab) + "\n";
  if (n_attn > 0) text += "n_attn = " + std::to_string(n_attn) + "\nn_ffn = " + std::to_string(n_ffn) + "\n";
  if (seq_len > 0) text += "seq_len = " + std::to_string(seq_len) + "\n";
  return text + more;
}

ModelConfig config_from_repo(const std::string& relative_path) {
  return model_config_load(plugins(), std::string(TFW_SOURCE_DIR) + "/" + relative_path);
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace tfw::test
