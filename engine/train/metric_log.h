// The trainer's metrics.jsonl: one JSON line per metric, flushed, so that a crash loses
// nothing already written; each line also goes to TrainOptions::on_metric (the run store).
#pragma once

#include <cmath>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/trainer.h"

namespace tfw {

// A data-parallel rank other than 0 gets a disabled log (an empty path): it writes nothing.
class MetricLog {
 public:
  MetricLog(const std::string& path, const TrainOptions& options) : options_(options) {
    if (path.empty()) return;
    out_.open(path, std::ios::app);
    if (!out_) throw Error(fmt::format("cannot write metrics to '{}'", path));
  }
  void write(std::int64_t step, std::int64_t tokens, double flops, double wall, const std::string& key,
             double value) {
    if (!out_.is_open()) return;
    if (options_.on_metric) options_.on_metric(key.c_str(), step, tokens, flops, wall, value);
    out_ << fmt::format(R"({{"step":{},"tokens":{},"flops":{:.6e},"wall":{:.3f},"key":{},"value":{}}})", step, tokens,
                        flops, wall, nlohmann::json(key).dump(), std::isfinite(value) ? fmt::format("{:.9g}", value) : "null")
         << '\n';
  }
  void flush() {
    if (out_.is_open()) out_.flush();
  }

 private:
  std::ofstream out_;
  const TrainOptions& options_;
};

}  // namespace tfw
