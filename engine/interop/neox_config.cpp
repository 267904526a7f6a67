// NeoX configs as JSON. See neox_config.h.
#include "engine/interop/neox_config.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"

namespace tfw {

namespace {

namespace fs = std::filesystem;

// A NeoX config file as JSON: NeoX writes its YAML configs in JSON's flow style with `#`
// comments, Python's True/False/None, single-quoted strings and trailing commas. Those are
// rewritten; anything else that is not JSON is an error naming the file.
// Within limits: 16 MiB and 32 levels (the official configs are a few KB, 3 levels deep); a
// deeper value would make every later dump() in a message recurse that deep.
constexpr std::uintmax_t kMaxNeoxConfigBytes = 16ull << 20;
constexpr int kMaxNeoxConfigDepth = 32;

}  // namespace

nlohmann::json neox_config_parse(const std::string& text, const std::string& path) {
  std::string json;
  json.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"' || c == '\'') {  // a string: copied as a double-quoted one
      json.push_back('"');
      std::size_t j = i + 1;
      for (; j < text.size() && text[j] != c; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) {
          json.push_back(text[j]);
          json.push_back(text[++j]);
        } else if (text[j] == '"') {
          json += "\\\"";
        } else {
          json.push_back(text[j]);
        }
      }
      json.push_back('"');
      i = j + 1;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      const std::string word = text.substr(i, j - i);
      if (word == "True" || word == "true")
        json += "true";
      else if (word == "False" || word == "false")
        json += "false";
      else if (word == "None" || word == "null")
        json += "null";
      else
        json += word;  // not JSON: the parser below says where
      i = j;
    } else if (c == ',') {
      std::size_t j = i + 1;
      while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (j < text.size() && text[j] == '#') {  // a comment after the comma: look past it
        std::size_t k = j;
        while (k < text.size()) {
          while (k < text.size() && text[k] != '\n') ++k;
          while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
          if (k < text.size() && text[k] == '#') continue;
          break;
        }
        j = k;
      }
      if (j >= text.size() || (text[j] != '}' && text[j] != ']')) json.push_back(',');
      ++i;
    } else {
      json.push_back(c);
      ++i;
    }
  }
  // A NeoX config is a flat table of some hundred settings: its bounds, checked while parsing.
  nlohmann::json value;
  const std::string why = json_parse_bounded(json, {kMaxNeoxConfigDepth, 1 << 16, 1 << 20}, value);
  if (why.rfind("is not valid JSON", 0) == 0) {
    throw UsageError(
        with_hint(fmt::format("config {}: not a NeoX config in JSON form: it {}", path, why),
                  "pass the release's config as in configs/tokenformer/*_eval.yml of Haiyang-W/TokenFormer"));
  }
  if (!why.empty()) throw UsageError(fmt::format("config {}: {}: not a NeoX config", path, why));
  if (!value.is_object()) throw UsageError(fmt::format("config {}: not a table of settings", path));
  return value;
}

nlohmann::json neox_config_read(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(fmt::format("config {}: a folder, not a config file", path));
  const std::uintmax_t bytes = fs::file_size(path, ec);
  if (!ec && bytes > kMaxNeoxConfigBytes) {
    throw UsageError(fmt::format("config {}: {} bytes, more than the 16 MiB a NeoX config may have", path, bytes));
  }
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("config {}: cannot read the file", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return neox_config_parse(text, path);
}

}  // namespace tfw
