// Internal to `tfw import` (import.cpp): a release's files and settings, read in
// import_release.cpp. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/interop/import.h"

namespace tfw::import_detail {

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
    for (char& c : key)
      if (c == '-') c = '_';
    static const std::map<std::string, std::string> aliases = {{"num_hidden_layers", "num_layers"},
                                                               {"layer_norm_eps", "layernorm_epsilon"}};
    auto it = aliases.find(key);
    return it == aliases.end() ? key : it->second;
  }
  std::map<std::string, std::pair<nlohmann::json, std::string>> values_;
};

// The items, joined with ", ", at most `most` of them and then how many more.
std::string join(const std::vector<std::string>& items, std::size_t most = 6);

// Throws UsageError when the release folder is missing or --out is not given.
void check_request(const ImportRequest& request);
// The NeoX configs to merge: --config's, else the folder's one *.yml or config.json.
std::vector<std::string> find_configs(const ImportRequest& request);
// The weights: --weights, else pytorch_model.bin, else the folder's one .pt/.bin/.pth.
std::string find_weights(const ImportRequest& request);
// The tokenizer: --tokenizer, else the folder's tokenizer.json; it must exist.
std::string find_tokenizer(const ImportRequest& request);

// The official model's settings, checked to be ones the tokenformer family represents exactly.
struct ModelSettings {
  std::int64_t layers = 0, d = 0, heads = 0, n_qkv = 0, n_ffn = 0, seq_len = 0;
  double rotary_pct = 0, rotary_base = 0;
  std::int64_t dh = 0, rotary_ndims = 0;
  std::string norm, final_norm;
  double eps = 0;
  std::string activation, our_norm;

  bool block_affine() const { return norm == "layernorm"; }
  bool final_affine() const { return final_norm == "layernorm"; }
};

// The settings `s` holds, checked; notes on what has no effect go into `result`.
ModelSettings read_settings(const Settings& s, ImportResult& result);

}  // namespace tfw::import_detail
