#include "storage/final_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace tfw {

FinalMetrics FinalMetrics::from_text(std::string text) {
  FinalMetrics out;
  out.text_ = text.empty() ? std::string("{}") : std::move(text);
  const nlohmann::json object = nlohmann::json::parse(out.text_, nullptr, false);
  if (!object.is_object()) return out;
  for (const auto& [key, v] : object.items()) {  // nlohmann's objects iterate in key order
    FinalValue value;
    if (v.is_boolean()) {
      value.kind = FinalValue::Kind::flag;
      value.flag = v.get<bool>();
    } else if (v.is_number_integer()) {
      value.kind = FinalValue::Kind::integer;
      // An unsigned integer above int64's range is kept as a number only.
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
        value.kind = FinalValue::Kind::number;
      } else {
        value.integer = v.get<std::int64_t>();
      }
      value.number = v.get<double>();
    } else if (v.is_number()) {
      value.kind = FinalValue::Kind::number;
      value.number = v.get<double>();
    } else if (v.is_string()) {
      value.kind = FinalValue::Kind::text;
      value.text = v.get<std::string>();
    } else {
      value.text = v.dump();
    }
    out.entries_.emplace_back(key, std::move(value));
  }
  return out;
}

const FinalValue* FinalMetrics::find(std::string_view key) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                             [](const auto& entry, std::string_view k) { return entry.first < k; });
  return it != entries_.end() && it->first == key ? &it->second : nullptr;
}

std::optional<double> FinalMetrics::number(std::string_view key) const {
  const FinalValue* v = find(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->number;
}

double FinalMetrics::number_or_nan(std::string_view key) const {
  return number(key).value_or(std::numeric_limits<double>::quiet_NaN());
}

bool FinalMetrics::flag(std::string_view key) const {
  const FinalValue* v = find(key);
  return v != nullptr && v->kind == FinalValue::Kind::flag && v->flag;
}

}  // namespace tfw
