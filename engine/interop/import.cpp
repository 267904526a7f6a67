// Importing official TokenFormer releases. See import.h and docs/import.md.
//
// The official model (megatron/model/tokenformer.py and tokenformer_model.py at
// Haiyang-W/TokenFormer) is a GPT-NeoX pipeline: sequential index 0 is the embedding, 1 a
// transpose, 2 .. L+1 the layers, L+2 a transpose, L+3 the final norm, L+4 the tied head.
// A state dict saved from it names the layers by those indices, with the embedding under
// tied_modules.embed (pipeline module) or under the index 0 (sequential module).
#include "engine/interop/import.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/interop/import_release.h"
#include "engine/interop/neox_config.h"
#include "engine/config/run_config.h"
#include "engine/interop/torch_pickle.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;

using namespace import_detail;

// ---- The weights.

using Tensors = std::vector<std::pair<std::string, torch::Tensor>>;
using TensorMap = std::map<std::string, torch::Tensor>;
using Mapping = std::vector<std::pair<std::string, std::string>>;  // our names -> official keys

// The state dict by key, without the wrappers' "module." and "sequential." prefixes.
TensorMap by_official_key(const std::string& weights, const Tensors& tensors) {
  TensorMap by_key;
  for (const auto& [key, tensor] : tensors) {
    std::string k = key;
    for (const char* prefix : {"module.", "sequential."}) {
      if (k.rfind(prefix, 0) == 0) k = k.substr(std::strlen(prefix));
    }
    if (!by_key.emplace(k, tensor).second) {
      throw UsageError(fmt::format("{}: the tensor {} appears twice", weights, k));
    }
  }
  return by_key;
}

std::string embedding_key_of(const std::string& weights, const TensorMap& by_key, const Tensors& tensors) {
  const std::string embedding_key = by_key.count("tied_modules.embed.word_embeddings.weight")
                                        ? "tied_modules.embed.word_embeddings.weight"
                                        : "0.word_embeddings.weight";
  if (!by_key.count(embedding_key)) {
    throw UsageError(
        with_hint(fmt::format("{}: no word embedding (tied_modules.embed.word_embeddings.weight or "
                              "sequential.0.word_embeddings.weight)",
                              weights),
                  "is this a TokenFormer checkpoint? Its keys begin: " + join(
                                                                             [&] {
                                                                               std::vector<std::string> keys;
                                                                               for (const auto& [k, t] : tensors)
                                                                                 keys.push_back(k);
                                                                               return keys;
                                                                             }(),
                                                                             4)));
  }
  return embedding_key;
}

struct Weights {
  TensorMap by_key;
  std::string embedding_key;
  torch::Tensor embedding;
  std::int64_t vocab = 0;
};

// The state dict and its word embedding, checked against hidden_size and the tokenizer.
Weights read_weights(const std::string& weights, std::int64_t d, const std::string& tokenizer,
                     const Tokenizer& text_tokenizer, ImportResult& result) {
  const Tensors tensors = torch_state_dict_read(weights);
  result.tensors = static_cast<std::int64_t>(tensors.size());
  Weights w;
  w.by_key = by_official_key(weights, tensors);
  w.embedding_key = embedding_key_of(weights, w.by_key, tensors);
  w.embedding = w.by_key.at(w.embedding_key);
  if (w.embedding.dim() != 2 || w.embedding.size(1) != d) {
    throw UsageError(
        fmt::format("{}: the word embedding is {}, hidden_size is {}", weights, c10::str(w.embedding.sizes()), d));
  }
  w.vocab = w.embedding.size(0);
  if (w.vocab < text_tokenizer.vocab_size()) {
    throw UsageError(fmt::format("the tokenizer {} has {} ids, the model's embedding only {} rows", tokenizer,
                                 text_tokenizer.vocab_size(), w.vocab));
  }
  return w;
}

void check_layer_count(const Settings& s, std::int64_t L, const std::string& weights, const TensorMap& by_key) {
  std::int64_t weight_layers = 0;  // layers in the weights: the indices that hold a query Pattention
  for (const auto& [key, tensor] : by_key) {
    const std::size_t dot = key.find('.');
    if (dot != std::string::npos && key.compare(dot, std::string::npos, ".attention.query.key_param_tokens") == 0) {
      ++weight_layers;
    }
  }
  if (weight_layers != L) {
    throw UsageError(with_hint(fmt::format("config {}: num_layers = {}, but the weights {} hold {} layers",
                                           s.where("num_layers"), L, weights, weight_layers),
                               "pass the release's own config (--config FILE)"));
  }
}

// Our names -> official keys (docs/import.md, "The layout").
Mapping official_keys(const ModelSettings& m, const std::string& embedding_key) {
  Mapping mapping = {{"embedding", embedding_key}};
  for (std::int64_t i = 0; i < m.layers; ++i) {
    const std::int64_t at = i + 2;
    for (auto [ours, theirs] : std::vector<std::pair<const char*, const char*>>{{"q", "attention.query"},
                                                                                {"k", "attention.key"},
                                                                                {"v", "attention.value"},
                                                                                {"o", "attention.proj"},
                                                                                {"ffn", "mlp"}}) {
      mapping.emplace_back(fmt::format("layers.{}.{}.keys", i, ours),
                           fmt::format("{}.{}.key_param_tokens", at, theirs));
      mapping.emplace_back(fmt::format("layers.{}.{}.values", i, ours),
                           fmt::format("{}.{}.value_param_tokens", at, theirs));
    }
    if (m.block_affine()) {
      for (const char* p : {"weight", "bias"}) {
        mapping.emplace_back(fmt::format("layers.{}.attn_norm.{}", i, p), fmt::format("{}.input_layernorm.{}", at, p));
        mapping.emplace_back(fmt::format("layers.{}.ffn_norm.{}", i, p),
                             fmt::format("{}.post_attention_layernorm.{}", at, p));
      }
    }
  }
  if (m.final_affine()) {
    mapping.emplace_back("final_norm.weight", fmt::format("{}.norm.weight", m.layers + 3));
    mapping.emplace_back("final_norm.bias", fmt::format("{}.norm.bias", m.layers + 3));
  }
  return mapping;
}

// A tied head may be saved again under the head's index; it must be the embedding.
void accept_tied_heads(const std::string& weights, std::int64_t L, const Weights& w, std::set<std::string>& used,
                       ImportResult& result) {
  for (const std::string& head :
       {fmt::format("{}.word_embeddings.weight", L + 4), fmt::format("{}.final_linear.weight", L + 4)}) {
    if (!w.by_key.count(head)) continue;
    if (!torch::equal(w.by_key.at(head), w.embedding)) {
      throw UsageError(
          with_hint(fmt::format("{}: the head {} differs from the word embedding: the model is untied", weights, head),
                    "the tokenformer family ties its head to the embedding; an untied model is not imported"));
    }
    used.insert(head);
    result.ignored.push_back(head + " (the tied head: equal to the embedding)");
  }
}

void check_missing(const std::string& weights, const ModelSettings& m, const TensorMap& by_key,
                   const Mapping& mapping) {
  std::vector<std::string> missing;
  for (const auto& [ours, theirs] : mapping) {
    if (!by_key.count(theirs)) missing.push_back(theirs);
  }
  if (!missing.empty()) {
    throw UsageError(
        with_hint(missing.size() == 1 ? fmt::format("{}: the tensor {} is missing", weights, missing.front())
                                      : fmt::format("{}: {} tensors of the config's model are missing: {}", weights,
                                                    missing.size(), join(missing)),
                  fmt::format("the config describes {} layers with norm = {} and final_norm = {}: check that it is the "
                              "release's own config",
                              m.layers, m.norm, m.final_norm)));
  }
}

void check_unexpected(const std::string& weights, const ModelSettings& m, const TensorMap& by_key,
                      const std::set<std::string>& used, ImportResult& result) {
  std::vector<std::string> unexpected;
  for (const auto& [key, tensor] : by_key) {
    if (used.count(key)) continue;
    if (key.find("rotary_emb.inv_freq") != std::string::npos) {
      result.ignored.push_back(key + " (rotary frequencies: computed from rotary_emb_base)");
      continue;
    }
    unexpected.push_back(key);
  }
  if (!unexpected.empty()) {
    throw UsageError(
        with_hint(fmt::format("{}: {} tensor(s) the config's model does not have: {}", weights, unexpected.size(),
                              join(unexpected)),
                  fmt::format("check num_layers ({}) and norm ({}) against the release", m.layers, m.norm)));
  }
}

// Every mapped key is in the weights, and every key of the weights is mapped, the tied head's
// copies and the rotary frequencies aside.
void check_keys(const std::string& weights, const ModelSettings& m, const Weights& w, const Mapping& mapping,
                ImportResult& result) {
  std::set<std::string> used;
  for (const auto& [ours, theirs] : mapping) used.insert(theirs);
  accept_tied_heads(weights, m.layers, w, used, result);
  check_missing(weights, m, w.by_key, mapping);
  check_unexpected(weights, m, w.by_key, used, result);
}

// ---- The model.

// --out, created when missing. Unless `done`, the destructor removes the files listed in
// `written`, and the folder when this import created it (only when empty).
struct Output {
  explicit Output(const std::string& out_dir) {
    remove_dir = !fs::exists(out_dir);
    fs::create_directories(out_dir);
    dir = fs::absolute(out_dir);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;
  ~Output() {
    if (done) return;
    std::error_code ec;
    for (const fs::path& file : written) fs::remove(file, ec);
    if (remove_dir) fs::remove(dir, ec);  // only when empty
  }

  fs::path dir;
  std::vector<fs::path> written;
  bool remove_dir = false;
  bool done = false;
};

fs::path copy_tokenizer(const std::string& tokenizer, Output& out) {
  const fs::path tokenizer_copy = out.dir / "tokenizer.json";
  if (fs::absolute(tokenizer) != tokenizer_copy) {
    out.written.push_back(tokenizer_copy);
    fs::copy_file(tokenizer, tokenizer_copy, fs::copy_options::overwrite_existing);
  }
  return tokenizer_copy;
}

// The run config of the imported model, named after the release folder.
toml::table run_config_table(const std::string& dir, const std::string& weights, const ModelSettings& m,
                             std::int64_t vocab) {
  fs::path release = fs::path(dir).lexically_normal();
  if (release.filename().empty()) release = release.parent_path();  // "DIR/"
  const std::string name = release.filename().string();
  toml::table model{
      {"layers", m.layers},
      {"d", m.d},
      {"heads", m.heads},
      {"n_attn", m.n_qkv},
      {"n_ffn", m.n_ffn},
      {"vocab", vocab},
      {"seq_len", m.seq_len},
      {"rotary_pct", m.rotary_pct},
      {"rotary_base", m.rotary_base},
      {"layernorm", toml::table{{"affine", m.block_affine()}, {"eps", m.eps}}},
      {"pattention", toml::table{{"norm", m.our_norm}, {"tau", "sqrt_n"}, {"eps", 0.0}}},
  };
  return toml::table{
      {"name", name.empty() ? std::string("imported") : name},
      {"description", fmt::format("imported from {} (tfw import tokenformer)", fs::absolute(weights).string())},
      {"family", "tokenformer"},
      {"model", model},
      {"data", toml::table{{"tokenizer", "tokenizer.json"}}},
  };
}

std::string write_run_config(const toml::table& table, Output& out) {
  const std::string config_path = (out.dir / "model.toml").string();
  out.written.push_back(config_path);
  std::ostringstream text;
  text << "# Written by `tfw import tokenformer` (docs/import.md).\n" << table << "\n";
  text_file_write(config_path, text.str(), "import");
  return config_path;
}

// Copies each official tensor into its parameter, as float32; every parameter must be filled.
void fill_parameters(Model& lm, const Mapping& mapping, const TensorMap& by_key, const std::string& weights,
                     bool final_affine, ImportResult& result) {
  std::map<std::string, torch::Tensor> parameters;
  for (const auto& item : lm.named_parameters()) parameters[item.key()] = item.value();
  std::set<std::string> filled;
  for (const auto& [ours, theirs] : mapping) {
    auto it = by_key.find(theirs);
    auto p = parameters.find(ours);
    if (p == parameters.end()) throw Error(fmt::format("import: the tokenformer model has no parameter {}", ours));
    if (it->second.sizes() != p->second.sizes()) {
      throw UsageError(fmt::format("{}: {} is {}, the config's model needs {} for it", weights, theirs,
                                   c10::str(it->second.sizes()), c10::str(p->second.sizes())));
    }
    if (!it->second.is_floating_point())
      throw UsageError(fmt::format("{}: {} is not a floating-point tensor", weights, theirs));
    p->second.copy_(it->second.to(torch::kFloat32));
    filled.insert(ours);
  }
  if (!final_affine) {  // a parameter-free final norm is the affine one at weight 1, bias 0
    parameters.at("final_norm.weight").fill_(1.0);
    parameters.at("final_norm.bias").zero_();
    filled.insert("final_norm.weight");
    filled.insert("final_norm.bias");
    result.notes.push_back("final_norm = layernorm_nonparam: the family's affine final norm with weight 1 and bias 0");
  }
  for (const auto& [ours, tensor] : parameters) {
    if (!filled.count(ours)) throw Error(fmt::format("import: the parameter {} was not filled", ours));
  }
}

// How the official model's settings were represented.
void add_notes(const ModelSettings& m, std::int64_t vocab, std::int64_t tokenizer_ids, ImportResult& result) {
  result.notes.push_back(fmt::format("norm_activation_type = {}: pattention.norm = {}", m.activation, m.our_norm));
  result.notes.push_back("pattention.eps = 0: the official normalisation has no epsilon");
  result.notes.push_back(
      "pattention.tau = sqrt_n: the official scale is the square root of each layer's token "
      "count at the time (n for softmax), also after growth");
  result.notes.push_back(fmt::format("norm = {}: layernorm.affine = {}, eps {}", m.norm, m.block_affine(), m.eps));
  result.notes.push_back(
      fmt::format("rotary on the first {} of each head's {} channels (rotary_pct {}), base {}, "
                  "NeoX's rotate-half pairing; angles in float64 (the official code: float32)",
                  m.rotary_ndims, m.dh, m.rotary_pct, m.rotary_base));
  result.notes.push_back(
      fmt::format("tied head; vocabulary of {} rows (the tokenizer has {} ids: padded)", vocab, tokenizer_ids));
}

std::string save_checkpoint(const fs::path& out, Model& lm, const RunConfig& config) {
  CheckpointMeta meta;
  meta.val_loss = std::nan("");
  meta.best_val_loss = meta.val_loss;
  meta.config_toml = run_config_text(config);
  return checkpoint_save(out.string(), lm, nullptr, meta).path;
}

}  // namespace

ImportResult import_tokenformer(const Registry& registry, const ImportRequest& request) {
  check_request(request);

  // ---- The files.
  const std::vector<std::string> configs = find_configs(request);
  const std::string weights = find_weights(request);
  const std::string tokenizer = find_tokenizer(request);
  const std::unique_ptr<Tokenizer> text_tokenizer = tokenizer_create(tokenizer);  // checks the file

  // ---- The settings.
  Settings s;
  for (const std::string& path : configs) s.merge(neox_config_read(path), path);
  ImportResult result;
  const ModelSettings m = read_settings(s, result);

  // ---- The weights.
  const Weights w = read_weights(weights, m.d, tokenizer, *text_tokenizer, result);
  check_layer_count(s, m.layers, weights, w.by_key);
  const Mapping mapping = official_keys(m, w.embedding_key);
  check_keys(weights, m, w, mapping, result);

  // ---- The model: a run config, then the family's own model, filled in. A failure from here
  // on removes what this import wrote into --out (a failed import left model.toml).
  Output out(request.out_dir);
  const fs::path tokenizer_copy = copy_tokenizer(tokenizer, out);
  const std::string config_path = write_run_config(run_config_table(request.dir, weights, m, w.vocab), out);
  RunConfig config = run_config_load(registry, config_path);
  std::shared_ptr<Model> lm = registry.family("tokenformer").build(*config.model.spec, 0);
  torch::NoGradGuard no_grad;
  fill_parameters(*lm, mapping, w.by_key, weights, m.final_affine(), result);
  add_notes(m, w.vocab, text_tokenizer->vocab_size(), result);

  result.checkpoint = save_checkpoint(out.dir, *lm, config);
  out.done = true;
  result.config = config_path;
  result.tokenizer = tokenizer_copy.string();
  result.model = config.model.spec->summary();
  result.parameters = config.model.spec->parameter_count();
  return result;
}

}  // namespace tfw
