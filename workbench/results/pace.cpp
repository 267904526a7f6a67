#include "workbench/results/pace.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tfw::results {

std::string pace_key(const toml::table& config) {
  const toml::table* train = config["train"].as_table();
  const toml::table* model = config["model"].as_table();
  if (train == nullptr || model == nullptr) return "";
  std::ostringstream key;
  key << config["family"].value_or(std::string()) << '|' << toml::json_formatter{*model} << '|'
      << (*train)["device"].value_or(std::string()) << '|' << (*train)["precision"].value_or(std::string()) << '|'
      << (*train)["batch_size"].value_or(std::int64_t{0}) << '|';
  // A number of micro-batches, or "auto" (a split the memory chose: not the same pace as 1).
  const auto accum = (*train)["grad_accum"];
  if (accum.is_string()) {
    key << accum.value_or(std::string());
  } else {
    key << accum.value_or(std::int64_t{1});
  }
  return key.str();
}

void GpuPaces::add(const RunRecord& record) {
  if (record.status != RunStatus::finished) return;
  const double rate = record.final_metrics.number_or_nan("tokens_per_second");
  if (!std::isfinite(rate) || rate <= 0) return;
  try {
    const toml::table config = toml::parse(record.config);
    if (config["train"]["device"].value_or(std::string("cpu")) == "cpu") return;
    rates_[pace_key(config)].push_back(rate);
  } catch (const toml::parse_error&) {
    // a config that does not parse measures nothing
  }
}

double GpuPaces::seconds(const toml::table& config, double tokens, std::size_t* runs) const {
  const auto it = rates_.find(pace_key(config));
  if (runs != nullptr) *runs = it == rates_.end() ? 0 : it->second.size();
  if (it == rates_.end()) return std::nan("");
  std::vector<double> values = it->second;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  return tokens / median;
}

}  // namespace tfw::results
