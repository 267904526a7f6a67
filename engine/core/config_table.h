// Typed configuration from TOML. A ConfigTable hands out typed values with defaults and
// remembers which keys were read; finish() reports every key left over as unknown. Every
// error names file:line:col, the dotted key and a fix (docs/design/STYLE.md 6 and 9).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace tfw {

// "file:line:col" of a node, or the --set override that produced it.
std::string config_where(const toml::node& node);

// Reads a TOML file. Missing file or a syntax error -> UsageError naming file:line:col.
toml::table config_read_file(const std::string& path);

// Applies `--set key=value` overrides (dotted keys, TOML values; a bare word is taken as a
// string) to a parsed table, creating sub-tables as needed.
void config_apply_overrides(toml::table& table, const std::vector<std::string>& overrides);

class ConfigTable {
 public:
  // `table` must outlive this view; `prefix` is the dotted path of the table ("model").
  ConfigTable(const toml::table& table, std::string prefix);

  bool has(std::string_view key) const;
  std::int64_t get_int(std::string_view key, std::int64_t fallback);
  std::int64_t require_int(std::string_view key);
  double get_double(std::string_view key, double fallback);
  // A finite number above 0 (a base, an epsilon), or at least 0 (a standard deviation): NaN, an
  // infinity or a value out of range is an error naming the key (it gave NaN at step 0).
  double get_positive(std::string_view key, double fallback);
  double get_nonnegative(std::string_view key, double fallback);
  bool get_bool(std::string_view key, bool fallback);
  std::string get_string(std::string_view key, const std::string& fallback);
  std::string require_string(std::string_view key);
  // An array of strings (absent: empty).
  std::vector<std::string> get_string_array(std::string_view key);
  // An array of integers (absent: empty).
  std::vector<std::int64_t> get_int_array(std::string_view key);
  std::string get_choice(std::string_view key, const std::string& fallback, const std::vector<std::string>& allowed);
  // A sub-table; an absent key gives an empty table. The sub-view must be finished too.
  ConfigTable sub(std::string_view key);

  // An array of tables ([[key]] in TOML); each view's prefix is "key[i]" and must be finished.
  std::vector<ConfigTable> sub_array(std::string_view key);
  // Marks `key` as known (read by other means); returns whether it is present.
  bool take(std::string_view key);
  // The raw sub-table (validated later by whoever reads it); an absent key gives an empty one.
  toml::table raw_table(std::string_view key);

  // The table itself, to walk keys chosen by the user (names of blocks, say).
  const toml::table& raw_self() const { return *table_; }

  // Throws UsageError for the first key that no getter asked for.
  void finish() const;

  // Throws UsageError "file:line:col: <prefix.key>: <message>" with a hint.
  [[noreturn]] void fail(std::string_view key, const std::string& message, const std::string& hint) const;

  std::string dotted(std::string_view key) const;

 private:
  const toml::node* lookup(std::string_view key);
  [[noreturn]] void fail_type(std::string_view key, const toml::node& node, const char* expected) const;
  [[noreturn]] void missing(std::string_view key, const std::string& hint);

  const toml::table* table_;
  std::string prefix_;
  std::set<std::string, std::less<>> read_;
  std::vector<std::string> known_;  // every key asked for, for "did you mean"
  static const toml::table empty_;
};

// A model size read from a config: at least 1 and at most `max` (fails naming the key
// otherwise). The bounds keep parameter and FLOP counts inside 64-bit integers, so an absurd
// size is a clear error instead of an overflow; memory is checked before training
// (train_memory_check).
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;  // d, n_attn, n_ffn, vocab, seq_len
inline constexpr std::int64_t kMaxLayers = 4096;
std::int64_t config_size(ConfigTable& table, const char* key, std::int64_t value, std::int64_t max = kMaxWidth);

}  // namespace tfw
