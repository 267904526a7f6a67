// The release's files and settings for `tfw import` (import.h): which files a release folder
// holds, and the NeoX settings, checked to be ones the tokenformer family represents exactly.
// Torch-free; the weights are mapped in import.cpp.
#include "engine/interop/import_release.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw::import_detail {

namespace fs = std::filesystem;

namespace {

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

// The sizes, the attention and the rotary embedding.
void read_shape(const Settings& s, ModelSettings& m) {
  m.layers = s.integer("num_layers");
  m.d = s.integer("hidden_size");
  m.heads = s.integer("num_attention_heads");
  m.n_qkv = s.integer("qkv_slot_num");
  const std::int64_t n_proj = s.integer("proj_slot_num");
  m.n_ffn = s.integer("ffn_slot_num");
  m.seq_len = s.integer("seq_length", s.has("max_position_embeddings")
                                          ? std::optional<std::int64_t>(s.integer("max_position_embeddings"))
                                          : std::optional<std::int64_t>(2048));
  if (m.d % m.heads != 0) unsupported(s, "num_attention_heads", fmt::format("does not divide hidden_size {}", m.d));
  if (n_proj != m.n_qkv) {
    unsupported(s, "proj_slot_num",
                fmt::format("differs from qkv_slot_num {}; the family has one token count for "
                            "the q, k, v and output projections",
                            m.n_qkv));
  }
  if (s.has("attention_config")) {
    const std::string text = s.raw("attention_config").dump();
    if (text.find("tokenformer") == std::string::npos) unsupported(s, "attention_config", "not a TokenFormer");
  }
  if (s.string("pos_emb", "learned") != "rotary") unsupported(s, "pos_emb", "only rotary embeddings are supported");
  m.rotary_pct = s.number("rotary_pct", 1.0);
  m.rotary_base = s.number("rotary_emb_base", 10000.0);
  m.dh = m.d / m.heads;
  m.rotary_ndims = static_cast<std::int64_t>(static_cast<double>(m.dh) * m.rotary_pct);
  if (m.rotary_ndims % 2 != 0) {
    unsupported(s, "rotary_pct", fmt::format("gives an odd rotary width {}", m.rotary_ndims));
  }
}

// The head, the residual, the norms and the Pattention normalisation.
void read_blocks(const Settings& s, ModelSettings& m, ImportResult& result) {
  if (s.boolean("no_weight_tying", false))
    unsupported(s, "no_weight_tying", "the family ties the head to the embedding");
  if (s.boolean("gpt_j_residual", false)) unsupported(s, "gpt_j_residual", "the family's residual is sequential");
  m.norm = s.string("norm", "layernorm");
  m.final_norm = s.string("final_norm", m.norm);
  if (m.norm != "layernorm" && m.norm != "layernorm_nonparam") unsupported(s, "norm", "only LayerNorms are supported");
  if (m.final_norm != "layernorm" && m.final_norm != "layernorm_nonparam") {
    unsupported(s, "final_norm", "only LayerNorms are supported");
  }
  m.eps = s.number("layernorm_epsilon", 1e-5);
  m.activation = s.string("norm_activation_type", "l2_norm_gelu");
  if (m.activation == "l2_norm_gelu")
    m.our_norm = "l2_gelu";
  else if (m.activation == "gelu_l2_norm")
    m.our_norm = "gelu_l2";
  else if (m.activation == "softmax")
    m.our_norm = "softmax";
  else
    unsupported(s, "norm_activation_type", "known: l2_norm_gelu, gelu_l2_norm, softmax");
  if (s.has("use_bias_in_attn_linear") && s.boolean("use_bias_in_attn_linear", false)) {
    result.notes.push_back("use_bias_in_attn_linear = true has no effect: Pattention layers have no bias");
  }
}

}  // namespace

std::string join(const std::vector<std::string>& items, std::size_t most) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < most; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > most) text += fmt::format(", and {} more", items.size() - most);
  return text;
}

// ---- The files.

void check_request(const ImportRequest& request) {
  std::error_code ec;
  if (!fs::is_directory(request.dir, ec)) {
    throw UsageError(with_hint(fmt::format("import: no such release folder: {}", request.dir),
                               "name the folder that holds the release's pytorch_model.bin and tokenizer.json"));
  }
  if (request.out_dir.empty()) throw UsageError("import: --out CHECKPOINT_DIR is required");
}

std::vector<std::string> find_configs(const ImportRequest& request) {
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
      throw UsageError(
          with_hint(fmt::format("import: {} configs in {} ({})", configs.size(), request.dir, join(configs)),
                    "choose with --config FILE (repeat it to merge several, later ones win, as NeoX does)"));
    }
  }
  return configs;
}

std::string find_weights(const ImportRequest& request) {
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
  return weights;
}

std::string find_tokenizer(const ImportRequest& request) {
  const std::string tokenizer =
      request.tokenizer.empty() ? (fs::path(request.dir) / "tokenizer.json").string() : request.tokenizer;
  std::error_code ec;
  if (!fs::is_regular_file(tokenizer, ec)) {
    throw UsageError(with_hint(fmt::format("import: no tokenizer.json in {}", request.dir),
                               "the releases use GPT-NeoX-20B's tokenizer.json: put it in the folder, or name it "
                               "with --tokenizer FILE"));
  }
  return tokenizer;
}

// ---- The settings.

ModelSettings read_settings(const Settings& s, ImportResult& result) {
  ModelSettings m;
  read_shape(s, m);
  read_blocks(s, m, result);
  return m;
}

}  // namespace tfw::import_detail
