#include "tests/support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/interop/model_export.h"
#include "engine/machine/runtime.h"

namespace tfw::test {

TwoThreads::TwoThreads() {
  plugins();
  before_ = torch::get_num_threads();
  torch::set_num_threads(std::max(2, before_));
}

TwoThreads::~TwoThreads() { torch::set_num_threads(before_); }

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

nlohmann::json toml_to_json(const toml::table& table) { return ::tfw::toml_to_json(table); }

std::string usage_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UsageError";
  return "";
}

void python_reference_inputs(const std::string& dir, nlohmann::json meta, torch::nn::Module& model) {
  std::filesystem::create_directories(dir);
  meta["params"] = nlohmann::json::array();
  std::ofstream weights(dir + "/weights.bin", std::ios::binary);
  for (const auto& item : model.named_parameters()) {
    meta["params"].push_back({{"name", item.key()}, {"shape", item.value().sizes().vec()}});
    const torch::Tensor flat = item.value().detach().to(torch::kFloat64).contiguous();
    weights.write(reinterpret_cast<const char*>(flat.data_ptr<double>()),
                  static_cast<std::streamsize>(flat.numel() * sizeof(double)));
  }
  std::ofstream(dir + "/meta.json") << meta.dump();
}

std::vector<std::vector<double>> python_references(const std::string& script, const std::vector<std::string>& dirs) {
  std::string command = TFW_PYTHON " " TFW_SOURCE_DIR "/tests/reference/run_many.py";
  for (const std::string& dir : dirs) command += " :: " TFW_SOURCE_DIR "/tests/reference/" + script + " " + dir;
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << command;
    return std::vector<std::vector<double>>(dirs.size());
  }
  std::vector<std::vector<double>> references;
  for (const std::string& dir : dirs) {
    std::ifstream in(dir + "/reference.bin", std::ios::binary | std::ios::ate);
    const auto bytes = static_cast<std::size_t>(in.tellg());
    std::vector<double> reference(bytes / sizeof(double));
    in.seekg(0);
    in.read(reinterpret_cast<char*>(reference.data()), static_cast<std::streamsize>(bytes));
    references.push_back(std::move(reference));
  }
  return references;
}

void expect_matches_reference(const std::vector<double>& reference, const torch::Tensor& logits,
                              const torch::Tensor& loss, torch::nn::Module& model) {
  std::size_t offset = 0;
  auto next = [&](const torch::Tensor& like) {
    if (offset + static_cast<std::size_t>(like.numel()) > reference.size())
      return torch::full(like.sizes(), NAN, torch::kFloat64);
    torch::Tensor t =
        torch::from_blob(const_cast<double*>(reference.data()) + offset, like.sizes(), torch::kFloat64).clone();
    offset += static_cast<std::size_t>(like.numel());
    return t;
  };
  EXPECT_LT(max_abs_diff(logits, next(logits)), 1e-10);
  EXPECT_NEAR(loss.item<double>(), next(loss.reshape({1})).item<double>(), 1e-12);
  for (const auto& item : model.named_parameters()) {
    EXPECT_LT(max_abs_diff(item.value().grad(), next(item.value())), 1e-10) << item.key();
  }
  EXPECT_EQ(offset, reference.size());
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

}  // namespace tfw::test
