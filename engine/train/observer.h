// What a training tells whoever watches it: a RunObserver's metrics, events, checkpoints and
// progress. The engine calls it (engine/train/trainer.cpp); the run's record implements it
// (runner/recorded_run.cpp), and so does metrics.jsonl (engine/train/metric_log.h). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plugin/task.h"

namespace tfw {

struct TrainProgress {
  std::int64_t step = 0, total_steps = 0, tokens = 0, examples = 0;
  double flops = 0, loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_second = 0, mfu = 0, eta_seconds = 0, elapsed_seconds = 0;
  double val_loss = 0;              // NaN until the first evaluation
  std::vector<Metric> val_metrics;  // on a step that evaluated: its metrics, the loss first (engine/plugin/task.h)
  bool evaluated = false;           // this step ran an evaluation
  // Measured time (docs/cli.md, "Where the time goes"), in this process: the mean step
  // (forward, backward, clipping, update) and the mean batch draw per step over the last
  // StepTimes::kWindow steps, as are tokens_per_second (training tokens over step time), mfu
  // and eta_seconds; evaluation, checkpoint and growth time in total.
  double step_seconds = 0, data_seconds = 0, eval_seconds = 0, checkpoint_seconds = 0;
  int threads = 0;  // torch threads in use (the ThreadGovernor may lower them)
  // Data-parallel runs: the mean time per step spent averaging gradients (inside
  // step_seconds), and the world size.
  double comm_seconds = 0;
  int world_size = 1;
};

// A checkpoint the trainer wrote: the archive, its step, CRC-32 and size.
struct CheckpointSaved {
  std::string path;
  std::int64_t step = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t bytes = 0;
};

// What a training tells whoever watches it; every method does nothing unless overridden. The
// run's record (runner/recorded_run.cpp: the store here, or a service) is one observer, and
// metrics.jsonl another (engine/train/metric_log.h). The engine does not know the store.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // One value of a step (train/loss, val/loss, growth/loss_after, ...); rank 0 only.
  virtual void metric(const char* /*key*/, std::int64_t /*step*/, std::int64_t /*tokens*/, double /*flops*/,
                      double /*wall*/, double /*value*/) {}
  // An event: "growth", "evaluation", "provenance", "nan", "threads", "checkpoint_damaged", ...
  virtual void event(const std::string& /*kind*/, std::int64_t /*step*/, const std::string& /*payload_json*/) {}
  // Before each checkpoint is written: the store commits its queued metrics here, so that a
  // crash after the checkpoint becomes valid cannot lose them.
  virtual void before_checkpoint() {}
  virtual void checkpoint(const CheckpointSaved& /*saved*/) {}
  virtual void checkpoint_removed(const std::string& /*path*/) {}  // pruned (train.keep_checkpoints)
  virtual void progress(const TrainProgress& /*progress*/) {}      // after every step
  virtual void message(const std::string& /*line*/) {}             // data preparation, resume, growth
};

}  // namespace tfw
