// See config_diff.h.
#include "engine/config/config_diff.h"

#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/core/error.h"

namespace tfw {

namespace {

void flatten(const toml::table& table, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [key, node] : table) {
    const std::string name = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* inner = node.as_table()) {
      flatten(*inner, name, out);
      continue;
    }
    std::ostringstream text;
    node.visit([&](const auto& value) { text << value; });
    out[name] = text.str();
  }
}

}  // namespace

std::map<std::string, std::string> config_flatten(const std::string& toml_text, const std::string& what) {
  toml::table table;
  try {
    table = toml::parse(toml_text, what);
  } catch (const toml::parse_error& e) {
    throw Error(fmt::format("{} is not valid TOML: {}", what, e.description()));
  }
  std::map<std::string, std::string> out;
  flatten(table, "", out);
  return out;
}

std::vector<ConfigDifference> config_differences(const std::string& a, const std::string& b) {
  const std::map<std::string, std::string> left = config_flatten(a, "the first config");
  const std::map<std::string, std::string> right = config_flatten(b, "the second config");
  std::set<std::string> keys;
  for (const auto& [k, v] : left) keys.insert(k);
  for (const auto& [k, v] : right) keys.insert(k);
  std::vector<ConfigDifference> out;
  for (const std::string& key : keys) {
    const auto l = left.find(key), r = right.find(key);
    const std::string lv = l == left.end() ? "" : l->second, rv = r == right.end() ? "" : r->second;
    if (l == left.end() || r == right.end() || lv != rv) out.push_back({key, lv, rv});
  }
  return out;
}

}  // namespace tfw
