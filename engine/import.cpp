// Importing official TokenFormer releases. See import.h and docs/import.md.
//
// The official model (megatron/model/tokenformer.py and tokenformer_model.py at
// Haiyang-W/TokenFormer) is a GPT-NeoX pipeline: sequential index 0 is the embedding, 1 a
// transpose, 2 .. L+1 the layers, L+2 a transpose, L+3 the final norm, L+4 the tied head.
// A state dict saved from it names the layers by those indices, with the embedding under
// tied_modules.embed (pipeline module) or under the index 0 (sequential module).
#include "engine/import.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/checkpoint.h"
#include "engine/data/tokenizer.h"
#include "engine/error.h"
#include "engine/neox_config.h"
#include "engine/run_config.h"
#include "engine/torch_pickle.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;


// The settings the import reads, from NeoX's names (or Hugging Face GPT-NeoX's aliases).
class Settings {
 public:
  void merge(const nlohmann::json& config, const std::string& path) {
    for (auto it = config.begin(); it != config.end(); ++it) {
      values_[normalise(it.key())] = {it.value(), path};
    }
  }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const nlohmann::json& raw(const std::string& key) const { return values_.at(key).first; }
  std::string where(const std::string& key) const { return values_.at(key).second; }

  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      throw UsageError(with_hint(fmt::format("the release's config does not set {}", key),
                                 "pass the NeoX config the release was trained with (--config FILE)"));
    }
    const nlohmann::json& v = raw(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() <= 0) {
      throw UsageError(fmt::format("config {}: {} must be a positive integer, got {}", where(key), key, v.dump()));
    }
    return v.get<std::int64_t>();
  }
  double number(const std::string& key, double fallback) const {
    return typed<double>(key, fallback, &nlohmann::json::is_number, "a number");
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    if (has(key) && raw(key).is_null()) return fallback;  // NeoX writes None for "the default"
    return typed<std::string>(key, fallback, &nlohmann::json::is_string, "a string");
  }
  bool boolean(const std::string& key, bool fallback) const {
    return typed<bool>(key, fallback, &nlohmann::json::is_boolean, "true or false");
  }

 private:
  template <typename T>
  T typed(const std::string& key, const T& fallback, bool (nlohmann::json::*is)() const noexcept,
          const char* what) const {
    if (!has(key)) return fallback;
    const nlohmann::json& v = raw(key);
    if (!(v.*is)()) throw UsageError(fmt::format("config {}: {} must be {}, got {}", where(key), key, what, v.dump()));
    return v.get<T>();
  }
  // NeoX accepts '-' and '_' alike; Hugging Face's GPT-NeoX config.json has other names.
  static std::string normalise(std::string key) {
    for (char& c : key) if (c == '-') c = '_';
    static const std::map<std::string, std::string> aliases = {{"num_hidden_layers", "num_layers"},
                                                               {"layer_norm_eps", "layernorm_epsilon"}};
    auto it = aliases.find(key);
    return it == aliases.end() ? key : it->second;
  }
  std::map<std::string, std::pair<nlohmann::json, std::string>> values_;
};

[[noreturn]] void unsupported(const Settings& s, const std::string& key, const std::string& why) {
  throw UsageError(with_hint(fmt::format("config {}: {} = {}: {}", s.where(key), key, s.raw(key).dump(), why),
                             "the workbench's tokenformer family cannot represent this model exactly, so it is not "
                             "imported (docs/import.md lists what is supported)"));
}

std::vector<std::string> files_with(const std::string& dir, const std::vector<std::string>& endings) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    for (const std::string& ending : endings) {
      if (name.size() >= ending.size() && name.compare(name.size() - ending.size(), ending.size(), ending) == 0) {
        found.push_back(entry.path().string());
        break;
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string join(const std::vector<std::string>& items, std::size_t most = 6) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > most) text += fmt::format(", and {} more", items.size() - most);
  return text;
}

}  // namespace

ImportResult import_tokenformer(const Registry& registry, const ImportRequest& request) {
  std::error_code ec;
  if (!fs::is_directory(request.dir, ec)) {
    throw UsageError(with_hint(fmt::format("import: no such release folder: {}", request.dir),
                               "name the folder that holds the release's pytorch_model.bin and tokenizer.json"));
  }
  if (request.out_dir.empty()) throw UsageError("import: --out CHECKPOINT_DIR is required");

  // ---- The files.
  std::vector<std::string> configs = request.configs;
  if (configs.empty()) {
    configs = files_with(request.dir, {".yml", ".yaml"});
    if (configs.empty() && fs::exists(fs::path(request.dir) / "config.json")) {
      configs.push_back((fs::path(request.dir) / "config.json").string());
    }
    if (configs.empty()) {
      throw UsageError(with_hint(fmt::format("import: no config in {} (a NeoX *.yml, or config.json)", request.dir),
                                 "pass the release's config with --config FILE: for TokenFormer-150M it is "
                                 "configs/tokenformer/150M_eval.yml in Haiyang-W/TokenFormer"));
    }
    if (configs.size() > 1) {
      throw UsageError(with_hint(fmt::format("import: {} configs in {} ({})", configs.size(), request.dir, join(configs)),
                                 "choose with --config FILE (repeat it to merge several, later ones win, as NeoX does)"));
    }
  }
  std::string weights = request.weights;
  if (weights.empty()) {
    const fs::path bin = fs::path(request.dir) / "pytorch_model.bin";
    if (fs::exists(bin)) {
      weights = bin.string();
    } else {
      std::vector<std::string> found = files_with(request.dir, {".pt", ".bin", ".pth"});
      if (found.size() != 1) {
        throw UsageError(with_hint(
            found.empty() ? fmt::format("import: no weights in {} (pytorch_model.bin or a .pt file)", request.dir)
                          : fmt::format("import: {} weight files in {} ({})", found.size(), request.dir, join(found)),
            "name the file with --weights FILE"));
      }
      weights = found.front();
    }
  }
  const std::string tokenizer = request.tokenizer.empty() ? (fs::path(request.dir) / "tokenizer.json").string()
                                                          : request.tokenizer;
  if (!fs::is_regular_file(tokenizer, ec)) {
    throw UsageError(with_hint(fmt::format("import: no tokenizer.json in {}", request.dir),
                               "the releases use GPT-NeoX-20B's tokenizer.json: put it in the folder, or name it "
                               "with --tokenizer FILE"));
  }
  const std::unique_ptr<Tokenizer> text_tokenizer = tokenizer_create(tokenizer);  // checks the file

  // ---- The settings.
  Settings s;
  for (const std::string& path : configs) s.merge(neox_config_read(path), path);
  ImportResult result;
  const std::int64_t L = s.integer("num_layers"), d = s.integer("hidden_size"), heads = s.integer("num_attention_heads");
  const std::int64_t n_qkv = s.integer("qkv_slot_num"), n_proj = s.integer("proj_slot_num");
  const std::int64_t n_ffn = s.integer("ffn_slot_num");
  const std::int64_t seq_len = s.integer("seq_length", s.has("max_position_embeddings")
                                                           ? std::optional<std::int64_t>(s.integer("max_position_embeddings"))
                                                           : std::optional<std::int64_t>(2048));
  if (d % heads != 0) unsupported(s, "num_attention_heads", fmt::format("does not divide hidden_size {}", d));
  if (n_proj != n_qkv) {
    unsupported(s, "proj_slot_num", fmt::format("differs from qkv_slot_num {}; the family has one token count for "
                                                "the q, k, v and output projections", n_qkv));
  }
  if (s.has("attention_config")) {
    const std::string text = s.raw("attention_config").dump();
    if (text.find("tokenformer") == std::string::npos) unsupported(s, "attention_config", "not a TokenFormer");
  }
  if (s.string("pos_emb", "learned") != "rotary") unsupported(s, "pos_emb", "only rotary embeddings are supported");
  const double rotary_pct = s.number("rotary_pct", 1.0);
  const double rotary_base = s.number("rotary_emb_base", 10000.0);
  const std::int64_t dh = d / heads;
  const auto rotary_ndims = static_cast<std::int64_t>(static_cast<double>(dh) * rotary_pct);
  if (rotary_ndims % 2 != 0) unsupported(s, "rotary_pct", fmt::format("gives an odd rotary width {}", rotary_ndims));
  if (s.boolean("no_weight_tying", false)) unsupported(s, "no_weight_tying", "the family ties the head to the embedding");
  if (s.boolean("gpt_j_residual", false)) unsupported(s, "gpt_j_residual", "the family's residual is sequential");
  const std::string norm = s.string("norm", "layernorm");
  const std::string final_norm = s.string("final_norm", norm);
  if (norm != "layernorm" && norm != "layernorm_nonparam") unsupported(s, "norm", "only LayerNorms are supported");
  if (final_norm != "layernorm" && final_norm != "layernorm_nonparam") {
    unsupported(s, "final_norm", "only LayerNorms are supported");
  }
  const double eps = s.number("layernorm_epsilon", 1e-5);
  const std::string activation = s.string("norm_activation_type", "l2_norm_gelu");
  std::string our_norm;
  if (activation == "l2_norm_gelu") our_norm = "l2_gelu";
  else if (activation == "gelu_l2_norm") our_norm = "gelu_l2";
  else if (activation == "softmax") our_norm = "softmax";
  else unsupported(s, "norm_activation_type", "known: l2_norm_gelu, gelu_l2_norm, softmax");
  if (s.has("use_bias_in_attn_linear") && s.boolean("use_bias_in_attn_linear", false)) {
    result.notes.push_back("use_bias_in_attn_linear = true has no effect: Pattention layers have no bias");
  }

  // ---- The weights.
  std::vector<std::pair<std::string, torch::Tensor>> tensors = torch_state_dict_read(weights);
  result.tensors = static_cast<std::int64_t>(tensors.size());
  std::map<std::string, torch::Tensor> by_key;
  for (auto& [key, tensor] : tensors) {
    std::string k = key;
    for (const char* prefix : {"module.", "sequential."}) {
      if (k.rfind(prefix, 0) == 0) k = k.substr(std::strlen(prefix));
    }
    if (!by_key.emplace(k, tensor).second) {
      throw UsageError(fmt::format("{}: the tensor {} appears twice", weights, k));
    }
  }
  const std::string embedding_key =
      by_key.count("tied_modules.embed.word_embeddings.weight") ? "tied_modules.embed.word_embeddings.weight"
                                                                : "0.word_embeddings.weight";
  if (!by_key.count(embedding_key)) {
    throw UsageError(with_hint(fmt::format("{}: no word embedding (tied_modules.embed.word_embeddings.weight or "
                                           "sequential.0.word_embeddings.weight)", weights),
                               "is this a TokenFormer checkpoint? Its keys begin: " +
                                   join([&] {
                                     std::vector<std::string> keys;
                                     for (const auto& [k, t] : tensors) keys.push_back(k);
                                     return keys;
                                   }(), 4)));
  }
  const torch::Tensor embedding = by_key.at(embedding_key);
  if (embedding.dim() != 2 || embedding.size(1) != d) {
    throw UsageError(fmt::format("{}: the word embedding is {}, hidden_size is {}", weights, c10::str(embedding.sizes()), d));
  }
  const std::int64_t vocab = embedding.size(0);
  if (vocab < text_tokenizer->vocab_size()) {
    throw UsageError(fmt::format("the tokenizer {} has {} ids, the model's embedding only {} rows", tokenizer,
                                 text_tokenizer->vocab_size(), vocab));
  }

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

  // Our names -> official keys (docs/import.md, "The layout").
  std::vector<std::pair<std::string, std::string>> mapping = {{"embedding", embedding_key}};
  const bool block_affine = norm == "layernorm";
  for (std::int64_t i = 0; i < L; ++i) {
    const std::int64_t at = i + 2;
    for (auto [ours, theirs] : std::vector<std::pair<const char*, const char*>>{
             {"q", "attention.query"}, {"k", "attention.key"}, {"v", "attention.value"}, {"o", "attention.proj"},
             {"ffn", "mlp"}}) {
      mapping.emplace_back(fmt::format("layers.{}.{}.keys", i, ours), fmt::format("{}.{}.key_param_tokens", at, theirs));
      mapping.emplace_back(fmt::format("layers.{}.{}.values", i, ours), fmt::format("{}.{}.value_param_tokens", at, theirs));
    }
    if (block_affine) {
      for (const char* p : {"weight", "bias"}) {
        mapping.emplace_back(fmt::format("layers.{}.attn_norm.{}", i, p), fmt::format("{}.input_layernorm.{}", at, p));
        mapping.emplace_back(fmt::format("layers.{}.ffn_norm.{}", i, p),
                             fmt::format("{}.post_attention_layernorm.{}", at, p));
      }
    }
  }
  const bool final_affine = final_norm == "layernorm";
  if (final_affine) {
    mapping.emplace_back("final_norm.weight", fmt::format("{}.norm.weight", L + 3));
    mapping.emplace_back("final_norm.bias", fmt::format("{}.norm.bias", L + 3));
  }
  std::set<std::string> used;
  for (const auto& [ours, theirs] : mapping) used.insert(theirs);
  // A tied head may be saved again under the head's index; it must be the embedding.
  for (const std::string& head : {fmt::format("{}.word_embeddings.weight", L + 4), fmt::format("{}.final_linear.weight", L + 4)}) {
    if (!by_key.count(head)) continue;
    if (!torch::equal(by_key.at(head), embedding)) {
      throw UsageError(with_hint(fmt::format("{}: the head {} differs from the word embedding: the model is untied",
                                             weights, head),
                                 "the tokenformer family ties its head to the embedding; an untied model is not imported"));
    }
    used.insert(head);
    result.ignored.push_back(head + " (the tied head: equal to the embedding)");
  }
  std::vector<std::string> missing;
  for (const auto& [ours, theirs] : mapping) {
    if (!by_key.count(theirs)) missing.push_back(theirs);
  }
  if (!missing.empty()) {
    throw UsageError(with_hint(
        missing.size() == 1 ? fmt::format("{}: the tensor {} is missing", weights, missing.front())
                            : fmt::format("{}: {} tensors of the config's model are missing: {}", weights,
                                          missing.size(), join(missing)),
        fmt::format("the config describes {} layers with norm = {} and final_norm = {}: check that it is the "
                    "release's own config", L, norm, final_norm)));
  }
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
    throw UsageError(with_hint(fmt::format("{}: {} tensor(s) the config's model does not have: {}", weights,
                                           unexpected.size(), join(unexpected)),
                               fmt::format("check num_layers ({}) and norm ({}) against the release", L, norm)));
  }

  // ---- The model: a run config, then the family's own model, filled in. A failure from here
  // on removes what this import wrote into --out (issue 33: a failed import left model.toml).
  const bool out_existed = fs::exists(request.out_dir);
  fs::create_directories(request.out_dir);
  const fs::path out = fs::absolute(request.out_dir);
  std::vector<fs::path> written;
  struct Cleanup {
    const std::vector<fs::path>& files;
    fs::path dir;
    bool remove_dir;
    bool done = false;
    ~Cleanup() {
      if (done) return;
      std::error_code ec;
      for (const fs::path& file : files) fs::remove(file, ec);
      if (remove_dir) fs::remove(dir, ec);  // only when empty
    }
  } cleanup{written, out, !out_existed};
  const fs::path tokenizer_copy = out / "tokenizer.json";
  if (fs::absolute(tokenizer) != tokenizer_copy) {
    written.push_back(tokenizer_copy);
    fs::copy_file(tokenizer, tokenizer_copy, fs::copy_options::overwrite_existing);
  }
  fs::path release = fs::path(request.dir).lexically_normal();
  if (release.filename().empty()) release = release.parent_path();  // "DIR/"
  const std::string name = release.filename().string();
  toml::table model{
      {"layers", L}, {"d", d}, {"heads", heads}, {"n_attn", n_qkv}, {"n_ffn", n_ffn}, {"vocab", vocab},
      {"seq_len", seq_len}, {"rotary_pct", rotary_pct}, {"rotary_base", rotary_base},
      {"layernorm", toml::table{{"affine", block_affine}, {"eps", eps}}},
      {"pattention", toml::table{{"norm", our_norm}, {"tau", "sqrt_n"}, {"eps", 0.0}}},
  };
  toml::table table{
      {"name", name.empty() ? std::string("imported") : name},
      {"description", fmt::format("imported from {} (tfw import tokenformer)", fs::absolute(weights).string())},
      {"family", "tokenformer"},
      {"model", model},
      {"data", toml::table{{"tokenizer", "tokenizer.json"}}},
  };
  const std::string config_path = (out / "model.toml").string();
  written.push_back(config_path);
  {
    std::ofstream file(config_path);
    file << "# Written by `tfw import tokenformer` (docs/import.md).\n" << table << "\n";
    if (!file) throw UsageError(fmt::format("import: cannot write {}", config_path));
  }
  RunConfig config = run_config_load(registry, config_path);
  std::shared_ptr<Model> lm = registry.family("tokenformer").build(*config.model.spec, 0);
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> parameters;
  for (const auto& item : lm->named_parameters()) parameters[item.key()] = item.value();
  std::set<std::string> filled;
  for (const auto& [ours, theirs] : mapping) {
    auto it = by_key.find(theirs);
    auto p = parameters.find(ours);
    if (p == parameters.end()) throw Error(fmt::format("import: the tokenformer model has no parameter {}", ours));
    if (it->second.sizes() != p->second.sizes()) {
      throw UsageError(fmt::format("{}: {} is {}, the config's model needs {} for it", weights, theirs,
                                   c10::str(it->second.sizes()), c10::str(p->second.sizes())));
    }
    if (!it->second.is_floating_point()) throw UsageError(fmt::format("{}: {} is not a floating-point tensor", weights, theirs));
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

  result.notes.push_back(fmt::format("norm_activation_type = {}: pattention.norm = {}", activation, our_norm));
  result.notes.push_back("pattention.eps = 0: the official normalisation has no epsilon");
  result.notes.push_back("pattention.tau = sqrt_n: the official scale is the square root of each layer's token "
                         "count at the time (n for softmax), also after growth");
  result.notes.push_back(fmt::format("norm = {}: layernorm.affine = {}, eps {}", norm, block_affine, eps));
  result.notes.push_back(fmt::format("rotary on the first {} of each head's {} channels (rotary_pct {}), base {}, "
                                     "NeoX's rotate-half pairing; angles in float64 (the official code: float32)",
                                     rotary_ndims, dh, rotary_pct, rotary_base));
  result.notes.push_back(fmt::format("tied head; vocabulary of {} rows (the tokenizer has {} ids: padded)", vocab,
                                     text_tokenizer->vocab_size()));

  CheckpointMeta meta;
  meta.val_loss = std::nan("");
  meta.best_val_loss = meta.val_loss;
  std::ostringstream resolved;
  resolved << config.resolved;
  meta.config_toml = resolved.str();
  result.checkpoint = checkpoint_save(out.string(), *lm, nullptr, meta).path;
  cleanup.done = true;
  result.config = config_path;
  result.tokenizer = tokenizer_copy.string();
  result.model = config.model.spec->summary();
  result.parameters = config.model.spec->parameter_count();
  return result;
}

}  // namespace tfw
