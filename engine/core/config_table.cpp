// TOML -> typed values with locations. See config.h.
#include "engine/core/config_table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw {

const toml::table ConfigTable::empty_{};

namespace {

constexpr std::string_view kOverridePrefix = "--set ";

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date/time";
  }
}

std::string render(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](auto&& value) { out << value; });
  std::string text = out.str();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

}  // namespace

std::string config_where(const toml::node& node) {
  const toml::source_region& source = node.source();
  std::string path = source.path ? *source.path : std::string("<config>");
  if (path.rfind(kOverridePrefix, 0) == 0) return path;
  return fmt::format("{}:{}:{}", path, source.begin.line, source.begin.column);
}

toml::table config_read_file(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) {
    throw UsageError(with_hint(fmt::format("config '{}' is a folder, not a TOML file", path),
                               "name a .toml file inside it (e.g. experiments/mini/tiny-train-tokenformer.toml)"));
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw UsageError(with_hint(fmt::format("config '{}' is not a regular file (a device, a pipe or a socket)", path),
                               "name a .toml file"));
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw UsageError(with_hint(fmt::format("config file '{}' not found", path),
                               "check the path; the paper's configurations are in "
                               "experiments/paper/, small ones in experiments/mini/"));
  }
  // A config is text a person writes: 16 MiB is far beyond any, and bounds what is read.
  if (std::filesystem::file_size(path, ec) > (16u << 20)) {
    throw UsageError(fmt::format("config '{}' is {} bytes, more than the 16 MiB a config may have", path,
                                 std::filesystem::file_size(path, ec)));
  }
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const toml::source_region& source = e.source();
    throw UsageError(with_hint(
        fmt::format("{}:{}:{}: TOML syntax error: {}", path, source.begin.line, source.begin.column, e.description()),
        "fix the syntax at that position (strings need quotes, tables are [name])"));
  }
}

void config_apply_overrides(toml::table& table, const std::vector<std::string>& overrides) {
  for (const std::string& override_text : overrides) {
    std::size_t eq = override_text.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(with_hint(fmt::format("--set '{}' is not key=value", override_text),
                                 "write for example --set model.n_attn=1024"));
    }
    std::string key = override_text.substr(0, eq);
    std::string value_text = override_text.substr(eq + 1);
    std::string source = std::string(kOverridePrefix) + override_text;
    toml::table parsed;
    try {
      parsed = toml::parse("value = " + value_text, source);
    } catch (const toml::parse_error&) {
      // A bare word (--set family=transformer) is a string.
      std::string escaped;
      for (char c : value_text) {
        if (c == '"' || c == '\\') escaped += '\\';
        escaped += c;
      }
      parsed = toml::parse("value = \"" + escaped + "\"", source);
    }
    // Walk the dotted key, creating tables.
    toml::table* current = &table;
    std::size_t start = 0;
    while (true) {
      std::size_t dot = key.find('.', start);
      std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (part.empty()) {
        throw UsageError(with_hint(fmt::format("--set '{}': empty part in key '{}'", override_text, key),
                                   "write dotted keys like model.pattention.norm"));
      }
      if (dot == std::string::npos) {
        // Moved, not copied: a toml++ copy drops the source region the errors quote.
        parsed.get("value")->visit([&](auto&& value) { current->insert_or_assign(part, std::move(value)); });
        break;
      }
      toml::node* next = current->get(part);
      if (next == nullptr) {
        // A table made here carries the --set text as its source, so an error about it (an
        // unknown table, `--set modle.d=128`) names the argument, not "<config>:0:0".
        toml::table made = toml::parse("t = {}", source);
        made.get("t")->visit([&](auto&& value) { current->insert(part, std::move(value)); });
        next = current->get(part);
      }
      if (!next->is_table()) {
        throw UsageError(with_hint(
            fmt::format("--set '{}': '{}' is {}, not a table", override_text, key.substr(0, dot), type_name(*next)),
            "set the key itself, or a key of an existing table"));
      }
      current = next->as_table();
      start = dot + 1;
    }
  }
}

ConfigTable::ConfigTable(const toml::table& table, std::string prefix) : table_(&table), prefix_(std::move(prefix)) {}

std::string ConfigTable::dotted(std::string_view key) const {
  return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
}

bool ConfigTable::has(std::string_view key) const { return table_->contains(key); }

const toml::node* ConfigTable::lookup(std::string_view key) {
  read_.emplace(key);
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  return table_->get(key);
}

void ConfigTable::fail(std::string_view key, const std::string& message, const std::string& hint) const {
  const toml::node* node = table_->get(key);
  std::string where = node ? config_where(*node) : config_where(*table_);
  throw UsageError(with_hint(fmt::format("{}: {}: {}", where, dotted(key), message), hint));
}

void ConfigTable::fail_type(std::string_view key, const toml::node& node, const char* expected) const {
  fail(key, fmt::format("expected {}, got {} ({})", expected, type_name(node), render(node)),
       fmt::format("write {} = <{}>", key, expected));
}

std::int64_t ConfigTable::get_int(std::string_view key, std::int64_t fallback) {
  const toml::node* node = lookup(key);
  if (node == nullptr) return fallback;
  if (auto value = node->value_exact<std::int64_t>()) return *value;
  fail_type(key, *node, "an integer");
}

std::int64_t ConfigTable::require_int(std::string_view key) {
  if (!has(key)) missing(key, fmt::format("add {} = <integer> to [{}]", key, prefix_));
  return get_int(key, 0);
}

// A required key that is absent: when the table holds a key one or two letters away from it
// (n_atn for n_attn), that key is the mistake, named where it stands.
void ConfigTable::missing(std::string_view key, const std::string& hint) {
  for (const auto& [other, node] : *table_) {
    if (read_.count(other.str()) || edit_distance(other.str(), std::string(key)) > 2) continue;
    const toml::source_region& source = other.source();
    std::string where = source.path ? fmt::format("{}:{}:{}", *source.path, source.begin.line, source.begin.column)
                                    : config_where(node);
    if (source.path && source.path->rfind(kOverridePrefix, 0) == 0) where = *source.path;
    throw UsageError(
        with_hint(fmt::format("{}: unknown key '{}', and {} is missing", where, dotted(other.str()), dotted(key)),
                  fmt::format("did you mean '{}'?", key)));
  }
  lookup(key);
  fail(key, "missing", hint);
}

double ConfigTable::get_double(std::string_view key, double fallback) {
  const toml::node* node = lookup(key);
  if (node == nullptr) return fallback;
  if (auto value = node->value_exact<double>()) return *value;
  if (auto value = node->value_exact<std::int64_t>()) return static_cast<double>(*value);
  fail_type(key, *node, "a number");
}

double ConfigTable::get_positive(std::string_view key, double fallback) {
  const double value = get_double(key, fallback);
  if (!std::isfinite(value) || value <= 0) fail(key, fmt::format("must be a finite number above 0, got {}", value), "");
  return value;
}

double ConfigTable::get_nonnegative(std::string_view key, double fallback) {
  const double value = get_double(key, fallback);
  if (!std::isfinite(value) || value < 0) fail(key, fmt::format("must be a finite number >= 0, got {}", value), "");
  return value;
}

bool ConfigTable::get_bool(std::string_view key, bool fallback) {
  const toml::node* node = lookup(key);
  if (node == nullptr) return fallback;
  if (auto value = node->value_exact<bool>()) return *value;
  fail_type(key, *node, "a boolean (true or false)");
}

std::string ConfigTable::get_string(std::string_view key, const std::string& fallback) {
  const toml::node* node = lookup(key);
  if (node == nullptr) return fallback;
  if (auto value = node->value_exact<std::string>()) return *value;
  fail_type(key, *node, "a string");
}

namespace {

// The values of an array of T at `node` (absent: empty); `fail` for any other shape.
template <typename T, typename Fail>
std::vector<T> array_of(const toml::node* node, Fail&& fail) {
  std::vector<T> values;
  if (node == nullptr) return values;
  const toml::array* array = node->as_array();
  if (array == nullptr) fail(*node);
  for (const toml::node& item : *array) {
    if (auto value = item.value_exact<T>()) {
      values.push_back(*value);
    } else {
      fail(item);
    }
  }
  return values;
}

}  // namespace

std::vector<std::string> ConfigTable::get_string_array(std::string_view key) {
  return array_of<std::string>(lookup(key), [&](const toml::node& n) { fail_type(key, n, "an array of strings"); });
}

std::vector<std::int64_t> ConfigTable::get_int_array(std::string_view key) {
  return array_of<std::int64_t>(lookup(key), [&](const toml::node& n) { fail_type(key, n, "an array of integers"); });
}

std::string ConfigTable::require_string(std::string_view key) {
  if (!has(key)) missing(key, fmt::format("add {} = \"...\"", dotted(key)));
  return get_string(key, "");
}

std::string ConfigTable::get_choice(std::string_view key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) {
  std::string value = get_string(key, fallback);
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    fail(key, fmt::format("'{}' is not one of: {}", value, fmt::join(allowed, ", ")),
         fmt::format("write {} = \"{}\"", key, allowed.front()));
  }
  return value;
}

ConfigTable ConfigTable::sub(std::string_view key) {
  const toml::node* node = lookup(key);
  if (node == nullptr) return ConfigTable(empty_, dotted(key));
  if (!node->is_table()) fail_type(key, *node, "a table");
  return ConfigTable(*node->as_table(), dotted(key));
}

std::vector<ConfigTable> ConfigTable::sub_array(std::string_view key) {
  const toml::node* node = lookup(key);
  std::vector<ConfigTable> out;
  if (node == nullptr) return out;
  const toml::array* array = node->as_array();
  if (array == nullptr) fail_type(key, *node, "an array of tables ([[key]])");
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& item = *array->get(i);
    if (!item.is_table()) fail_type(key, item, "an array of tables ([[key]])");
    out.emplace_back(*item.as_table(), fmt::format("{}[{}]", dotted(key), i));
  }
  return out;
}

bool ConfigTable::take(std::string_view key) { return lookup(key) != nullptr; }

toml::table ConfigTable::raw_table(std::string_view key) {
  const toml::node* node = lookup(key);
  if (node == nullptr) return toml::table{};
  if (!node->is_table()) fail_type(key, *node, "a table");
  return *node->as_table();
}

void ConfigTable::finish() const {
  for (const auto& [key, node] : *table_) {
    if (read_.count(key.str())) continue;
    std::string suggestion;
    std::size_t best = 3;
    for (const std::string& candidate : known_) {
      std::size_t distance = edit_distance(key.str(), candidate);
      if (distance < best) {
        best = distance;
        suggestion = candidate;
      }
    }
    const toml::source_region& source = key.source();
    std::string where = source.path ? fmt::format("{}:{}:{}", *source.path, source.begin.line, source.begin.column)
                                    : config_where(node);
    if (source.path && source.path->rfind(kOverridePrefix, 0) == 0) where = *source.path;
    std::string hint = suggestion.empty()
                           ? fmt::format("known keys here: {}", fmt::join(known_, ", "))
                           : fmt::format("did you mean '{}'? known keys here: {}", suggestion, fmt::join(known_, ", "));
    throw UsageError(with_hint(fmt::format("{}: unknown key '{}'", where, dotted(key.str())), hint));
  }
}

std::int64_t config_size(ConfigTable& table, const char* key, std::int64_t value, std::int64_t max) {
  if (value <= 0) table.fail(key, fmt::format("must be positive, got {}", value), "use a size >= 1");
  if (value > max) {
    table.fail(key, fmt::format("{} is larger than this tfw supports (at most {})", value, max),
               "check the number: is it a typo?");
  }
  return value;
}

}  // namespace tfw
