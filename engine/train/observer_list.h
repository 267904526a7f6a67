// Several RunObservers as one: each call goes to every observer, in the order they were
// added. The trainer tells the caller's observer (TrainOptions::observer), then metrics.jsonl
// (rank 0). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/train/observer.h"

namespace tfw {

class RunObservers : public RunObserver {
 public:
  void add(RunObserver* observer) {
    if (observer != nullptr) all_.push_back(observer);
  }
  void metric(const char* key, std::int64_t step, std::int64_t tokens, double flops, double wall,
              double value) override {
    for (RunObserver* o : all_) o->metric(key, step, tokens, flops, wall, value);
  }
  void event(const std::string& kind, std::int64_t step, const std::string& payload_json) override {
    for (RunObserver* o : all_) o->event(kind, step, payload_json);
  }
  void before_checkpoint() override {
    for (RunObserver* o : all_) o->before_checkpoint();
  }
  void checkpoint(const CheckpointSaved& saved) override {
    for (RunObserver* o : all_) o->checkpoint(saved);
  }
  void checkpoint_removed(const std::string& path) override {
    for (RunObserver* o : all_) o->checkpoint_removed(path);
  }
  void progress(const TrainProgress& progress) override {
    for (RunObserver* o : all_) o->progress(progress);
  }
  void message(const std::string& line) override {
    for (RunObserver* o : all_) o->message(line);
  }

 private:
  std::vector<RunObserver*> all_;
};

}  // namespace tfw
