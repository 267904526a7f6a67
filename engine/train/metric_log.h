// metrics.jsonl, a RunObserver: one JSON line per metric, flushed after each step, so that a
// crash loses nothing already written.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/train/observer.h"

namespace tfw {

class MetricLog : public RunObserver {
 public:
  explicit MetricLog(const std::string& path) {
    out_.open(path, std::ios::app);
    if (!out_) throw Error(fmt::format("cannot write metrics to '{}'", path));
  }
  void metric(const char* key, std::int64_t step, std::int64_t tokens, double flops, double wall,
              double value) override {
    out_ << fmt::format(R"({{"step":{},"tokens":{},"flops":{:.6e},"wall":{:.3f},"key":{},"value":{}}})", step, tokens,
                        flops, wall, nlohmann::json(key).dump(),
                        std::isfinite(value) ? fmt::format("{:.9g}", value) : "null")
         << '\n';
  }
  void flush() { out_.flush(); }

 private:
  std::ofstream out_;
};

}  // namespace tfw
