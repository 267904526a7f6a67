// `tfw export-model` and `tfw import safetensors` (issue 37): the exported folder, loaded by
// the safetensors package's own reader into the independent Python reference model, computes
// the engine's logits; importing it back gives the checkpoint's tensors bit for bit; and a
// hostile or broken folder is a clear error that leaves nothing behind.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/error.h"
#include "engine/interop/model_export.h"
#include "engine/nn/pattention.h"
#include "engine/config/run_config.h"
#include "tests/support.h"

namespace tfw {
namespace test_model_export {

namespace fs = std::filesystem;
using nlohmann::json;

struct Exported {
  RunConfig config;
  std::shared_ptr<Model> model;
  std::string checkpoint;
};

// A tiny model of `family`, its norms moved off their init, saved as a checkpoint at step 7.
Exported saved_model(const std::string& family, const std::string& dir, const std::string& more) {
  fs::remove_all(dir);
  const bool pattention = family == "tokenformer";
  const std::string text = test::TinyModel{family, 16, 2, 30, pattention ? 12 : 0, pattention ? 20 : 0}.toml(more) +
                           "[train]\nmax_steps = 10\n";
  Exported e;
  e.config = run_config_parse(test::plugins(), toml::parse(text, std::string("tiny.toml")), "tiny.toml");
  e.model = test::plugins().family(family).build(*e.config.model.spec, 3);
  torch::manual_seed(5);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : e.model->named_parameters()) {
      if (item.key().find("norm") != std::string::npos) item.value().add_(torch::randn_like(item.value()) * 0.1);
    }
  }
  CheckpointMeta meta;
  meta.step = 7;
  meta.tokens = 7 * 64;
  meta.val_loss = meta.best_val_loss = std::nan("");
  meta.config_toml = run_config_text(e.config);
  e.checkpoint = checkpoint_save(dir + "/checkpoints", *e.model, nullptr, meta).path;
  return e;
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::vector<double> read_doubles(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<double> values(static_cast<std::size_t>(in.tellg()) / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(double)));
  return values;
}

// The reference's logits of `ids` from the exported folder, or empty when the script failed.
std::vector<double> python_logits(const std::string& dir, const torch::Tensor& ids) {
  json rows = json::array();
  for (std::int64_t b = 0; b < ids.size(0); ++b) {
    rows.push_back(
        std::vector<std::int64_t>(ids[b].data_ptr<std::int64_t>(), ids[b].data_ptr<std::int64_t>() + ids.size(1)));
  }
  write_text(dir + "/ids.json", rows.dump());
  const std::string command = TFW_PYTHON " " TFW_SOURCE_DIR "/tests/reference/exported_model.py " + dir;
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << command;
    return {};
  }
  return read_doubles(dir + "/logits.bin");
}

void check_round_trip(const std::string& family, const std::string& more) {
  SCOPED_TRACE(family);
  const std::string root = (fs::temp_directory_path() / ("tfw-model-export-" + family)).string();
  Exported e = saved_model(family, root, more);
  const std::string out = root + "/exported";
  const ModelExport result = export_model(test::plugins(), e.checkpoint, out);
  EXPECT_EQ(result.step, 7);
  EXPECT_EQ(result.parameters, e.config.model.spec->parameter_count());
  EXPECT_EQ(result.tensors, static_cast<std::int64_t>(checkpoint_model_tensors(*e.model).size()));

  const json config = read_json(out + "/config.json");
  EXPECT_EQ(config["format"], "tfw-model");
  EXPECT_EQ(config["format_version"], 1);
  EXPECT_EQ(config["family"], family);
  EXPECT_EQ(config["model"], test::toml_to_json(e.config.model.spec->to_toml()));
  EXPECT_EQ(config["config_toml"], run_config_text(e.config));
  EXPECT_EQ(config["source"]["step"], 7);
  EXPECT_EQ(config["source"]["tokens"], 7 * 64);

  // Back in: the same tensors, bit for bit, and the same config.
  const ImportResult back = import_safetensors(test::plugins(), out, root + "/imported");
  EXPECT_EQ(back.tensors, result.tensors);
  std::shared_ptr<Model> fresh = test::plugins().family(family).build(*e.config.model.spec, 99);
  const CheckpointMeta meta = checkpoint_load(back.checkpoint, *fresh, nullptr);
  EXPECT_EQ(meta.config_toml, run_config_text(e.config));
  EXPECT_EQ(config_identity(run_config_load(test::plugins(), back.config)), config_identity(e.config));
  const auto original = checkpoint_model_tensors(*e.model), imported = checkpoint_model_tensors(*fresh);
  ASSERT_EQ(original.size(), imported.size());
  for (std::size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(original[i].first, imported[i].first);
    EXPECT_TRUE(torch::equal(original[i].second, imported[i].second)) << original[i].first;
  }

  // The independent float64 reference, fed by safetensors' own reader, computes our logits.
  torch::manual_seed(11);
  const torch::Tensor ids = torch::randint(30, {2, 9}, torch::kInt64);
  const std::vector<double> reference = python_logits(out, ids);
  e.model->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = e.model->forward(ids).reshape({-1}).contiguous();
  ASSERT_EQ(reference.size(), static_cast<std::size_t>(logits.numel()));
  const torch::Tensor expected =
      torch::from_blob(const_cast<double*>(reference.data()), {logits.numel()}, torch::kFloat64);
  EXPECT_LT(test::max_abs_diff(logits, expected), 1e-10);
  EXPECT_GT(logits.abs().max().item<double>(), 1e-3);  // not a vacuous comparison of zeros
  // The loader docs/export-model.md gives users, run as written (tokenformer only).
  if (family != "tokenformer") return;
  std::vector<double> docs = read_doubles(out + "/logits_docs.bin");
  ASSERT_EQ(docs.size(), reference.size());
  EXPECT_LT(test::max_abs_diff(logits, torch::from_blob(docs.data(), {logits.numel()}, torch::kFloat64)), 1e-10);
}

TEST(ModelExport, PythonReferenceComputesTheLogitsAndImportIsBitExact) {
  check_round_trip("tokenformer", "[model.layernorm]\naffine = true\n[model.init]\nkey_std = 0.3\nvalue_std = 0.3\n");
  check_round_trip("transformer", "[model.init]\nstd = 0.2\n");
}

// A grown model keeps tau = sqrt(n0) and n0 from before its growth. The loader of the docs reads
// them and computes the engine's logits; the reference model, which takes n from the shapes,
// describes ungrown models only, and differs here (so the scale is really exercised).
TEST(ModelExport, TheDocsLoaderReadsAGrownModelsScale) {
  const std::string root = (fs::temp_directory_path() / "tfw-model-export-grown").string();
  fs::remove_all(root);
  auto config = [](int n_attn, int n_ffn) {
    const std::string text =
        test::TinyModel{"tokenformer", 16, 2, 30, n_attn, n_ffn}.toml() + "[train]\nmax_steps = 10\n";
    return run_config_parse(test::plugins(), toml::parse(text, std::string("tiny.toml")), "tiny.toml");
  };
  const RunConfig small = config(12, 20), grown = config(16, 24);
  std::shared_ptr<Model> model = test::plugins().family("tokenformer").build(*small.model.spec, 3);
  torch::manual_seed(6);
  for (const auto& item : model->named_modules()) {
    if (auto* layer = dynamic_cast<PattentionImpl*>(item.value().get())) {
      layer->append_tokens(torch::randn({4, layer->keys.size(1)}) * 0.3, torch::randn({4, layer->values.size(1)}));
    }
  }
  CheckpointMeta meta;
  meta.val_loss = meta.best_val_loss = std::nan("");
  meta.config_toml = run_config_text(grown);
  const std::string checkpoint = checkpoint_save(root + "/checkpoints", *model, nullptr, meta).path;
  const std::string out = root + "/exported";
  export_model(test::plugins(), checkpoint, out);
  torch::manual_seed(12);
  const torch::Tensor ids = torch::randint(30, {2, 9}, torch::kInt64);
  std::vector<double> reference = python_logits(out, ids);
  std::vector<double> docs = read_doubles(out + "/logits_docs.bin");
  model->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(ids).reshape({-1}).contiguous();
  ASSERT_EQ(docs.size(), static_cast<std::size_t>(logits.numel()));
  ASSERT_EQ(reference.size(), docs.size());
  EXPECT_LT(test::max_abs_diff(logits, torch::from_blob(docs.data(), {logits.numel()}, torch::kFloat64)), 1e-10);
  EXPECT_GT(test::max_abs_diff(logits, torch::from_blob(reference.data(), {logits.numel()}, torch::kFloat64)), 1e-6);
}

TEST(ModelExport, BrokenOrHostileFoldersAreClearErrorsThatLeaveNothing) {
  const std::string root = (fs::temp_directory_path() / "tfw-model-export-bad").string();
  Exported e = saved_model("tokenformer", root, "");
  const std::string out = root + "/exported", target = root + "/imported";
  export_model(test::plugins(), e.checkpoint, out);
  const json good = read_json(out + "/config.json");
  auto import_error = [&] {
    const std::string message = test::usage_error([&] { import_safetensors(test::plugins(), out, target); });
    EXPECT_FALSE(fs::exists(target)) << message;  // a failed import leaves nothing behind
    return message;
  };
  auto with_config = [&](const json& config) { write_text(out + "/config.json", config.dump()); };

  fs::remove(out + "/config.json");
  EXPECT_NE(import_error().find("config.json not found"), std::string::npos);

  json other = good;
  other["format"] = "something-else";
  with_config(other);
  EXPECT_NE(import_error().find("is not a tfw model export"), std::string::npos);

  other = good;
  other["format_version"] = 2;
  with_config(other);
  EXPECT_NE(import_error().find("format_version 2, this tfw reads version 1"), std::string::npos);

  write_text(out + "/config.json", std::string(5u << 20, ' '));
  EXPECT_NE(import_error().find("more than a model's config.json may hold"), std::string::npos);

  write_text(out + "/config.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_NE(import_error().find("nested more than 16 levels deep"), std::string::npos);

  write_text(out + "/config.json", "{\"format\": ");
  EXPECT_NE(import_error().find("is not valid JSON"), std::string::npos);

  other = good;
  other["model"]["n_attn"] = 24;  // config.json's two descriptions disagree
  with_config(other);
  EXPECT_NE(import_error().find("\"model\" and the model of \"config_toml\" differ"), std::string::npos);

  other.erase("config_toml");  // a hand-written config.json: its model no longer fits the weights
  with_config(other);
  const std::string misfit = import_error();
  EXPECT_NE(misfit.find("does not fit this model"), std::string::npos) << misfit;
  EXPECT_NE(misfit.find("has shape [12, 16] in the file, [24, 16] in the model"), std::string::npos) << misfit;

  other["model"]["n_attn"] = nullptr;
  with_config(other);
  EXPECT_NE(import_error().find("has no TOML form"), std::string::npos);

  with_config(good);  // a truncated weights file
  const std::uintmax_t size = fs::file_size(out + "/model.safetensors");
  fs::resize_file(out + "/model.safetensors", size - 5);
  EXPECT_NE(import_error().find("model.safetensors"), std::string::npos);
}

}  // namespace test_model_export
}  // namespace tfw
