// A run's final metrics: the JSON object a run's book writes when the run ends (train_loss,
// val_loss, tokens_per_second, mfu, examples, contended, ...; runner/recorded_run.cpp), typed
// once when the store reads the row, so that readers ask for a number or a flag instead of
// parsing text. The stored text is kept verbatim beside the values: a bundle exports the
// bytes it imported, and its hash does not change. Never includes torch or a JSON library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfw {

struct FinalValue {
  enum class Kind { number, integer, flag, text, other };
  Kind kind = Kind::other;
  double number = 0;         // number and integer (an integer as a double too)
  std::int64_t integer = 0;  // integer
  bool flag = false;         // flag: a JSON boolean
  std::string text;          // text: the string; other (null, array, object): its JSON
  bool is_number() const { return kind == Kind::number || kind == Kind::integer; }
};

class FinalMetrics {
 public:
  FinalMetrics() = default;  // no metrics: "{}"
  // The stored text, read once. A text that is not a JSON object keeps its bytes and has no
  // values (a store written by hand; the store's own writers only write objects).
  static FinalMetrics from_text(std::string text);

  const std::string& text() const { return text_; }
  bool empty() const { return entries_.empty(); }
  // Every key in the order JSON objects are read here: sorted by key.
  const std::vector<std::pair<std::string, FinalValue>>& entries() const { return entries_; }
  const FinalValue* find(std::string_view key) const;
  // A number (or integer) metric; nullopt when absent or not a number.
  std::optional<double> number(std::string_view key) const;
  // number(), or NaN.
  double number_or_nan(std::string_view key) const;
  // A boolean metric (`contended`); false when absent or not a boolean.
  bool flag(std::string_view key) const;

  // Equal when stored as the same text (the values follow from it).
  friend bool operator==(const FinalMetrics& a, const FinalMetrics& b) { return a.text_ == b.text_; }
  friend bool operator!=(const FinalMetrics& a, const FinalMetrics& b) { return !(a == b); }

 private:
  std::string text_ = "{}";
  std::vector<std::pair<std::string, FinalValue>> entries_;
};

}  // namespace tfw
