// The trainer's metrics.jsonl: one JSON line per metric, flushed, so that a crash loses
// nothing already written; each line also goes to a sink (the run store's, through
// TrainOptions::on_metric).
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace tfw {

// A data-parallel rank other than 0 gets a disabled log (an empty path): it writes nothing.
class MetricLog {
 public:
  using Sink = std::function<void(const char* key, std::int64_t step, std::int64_t tokens, double flops, double wall,
                                  double value)>;

  MetricLog(const std::string& path, Sink sink) : sink_(std::move(sink)) {
    if (path.empty()) return;
    out_.open(path, std::ios::app);
    if (!out_) throw Error(fmt::format("cannot write metrics to '{}'", path));
  }
  void write(std::int64_t step, std::int64_t tokens, double flops, double wall, const std::string& key,
             double value) {
    if (!out_.is_open()) return;
    if (sink_) sink_(key.c_str(), step, tokens, flops, wall, value);
    out_ << fmt::format(R"({{"step":{},"tokens":{},"flops":{:.6e},"wall":{:.3f},"key":{},"value":{}}})", step, tokens,
                        flops, wall, nlohmann::json(key).dump(), std::isfinite(value) ? fmt::format("{:.9g}", value) : "null")
         << '\n';
  }
  void flush() {
    if (out_.is_open()) out_.flush();
  }

 private:
  std::ofstream out_;
  Sink sink_;
};

}  // namespace tfw
