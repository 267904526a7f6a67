// The Trainer class behind train_run (engine/train/trainer.h), shared by its two source files:
// engine/train/trainer.cpp (the loop: steps, read-backs, evaluation, growth, checkpoints) and
// engine/train/trainer_setup.cpp (setting up: data, model, optimiser, a checkpoint to resume
// or start from, rank 0's state, the announcement; and the summary at the end). Internal to
// the engine; includes torch.
#pragma once

#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/machine/cpu_load.h"
#include "engine/nn/mask.h"
#include "engine/nn/model.h"
#include "engine/plugin/registry.h"
#include "engine/train/growth_stages.h"
#include "engine/train/metric_log.h"
#include "engine/train/observer_list.h"
#include "engine/train/optim.h"
#include "engine/train/profile.h"
#include "engine/train/step_times.h"
#include "engine/train/task_data.h"
#include "engine/train/trainer.h"

namespace tfw::train_impl {

using Clock = std::chrono::steady_clock;
using AdamW = torch::optim::AdamW;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// An "evaluation" event's payload: the loss, the tokens, and the headline metrics (accuracy).
std::string evaluation_payload(double val_loss, std::int64_t tokens, const std::vector<Metric>& metrics);

// Everything a step changes: the counters a checkpoint stores (step, tokens, FLOPs, losses,
// lineage, data cursor), the model and its optimiser, and where the growth schedule stands.
struct TrainState : CheckpointMeta {
  std::shared_ptr<Model> model;
  std::unique_ptr<AdamW> optimizer;       // holds the state: checkpoints read and write it
  std::optional<FusedAdamW> fused;        // its update (engine/train/optim.h); renewed with it
  std::vector<torch::Tensor> parameters;  // model->parameters(), renewed at each growth
  std::int64_t restart_step = 0;          // the last learning-rate schedule restart (0: none)
  std::size_t next_stage = 0;             // the next growth stage to apply
};

// One optimiser step, as it stands until it is read back: the loss and the gradient norm stay
// on the device (0-dim tensors) until the next read-back copies every pending step's at once.
struct StepResult {
  torch::Tensor loss, grad_norm;
  double lr = 0;
  double wall = 0;  // the run's wall time when the update was computed
  // The counters before the step (a non-finite loss is recorded there, as the update it
  // dropped) and after it (its train/* metrics).
  std::int64_t step_before = 0, tokens_before = 0, step = 0, tokens = 0;
  double flops_before = 0, flops = 0;
  TrainProgress progress;  // its loss and gradient norm filled in at the read-back
};

class Trainer {
 public:
  Trainer(const Registry& registry, const RunConfig& config, const TrainOptions& options);
  TrainSummary run();

 private:
  // Setting up (engine/train/trainer_setup.cpp).
  void split_choose();
  void open_data();
  void restore();
  void resume();
  void start_from(const std::string& checkpoint);
  void share_rank0_state(bool optimizer_loaded);
  void prepare();
  void announce();
  TrainSummary finish();
  std::unique_ptr<AdamW> make_optimizer() const;
  // The loop's parts (engine/train/trainer.cpp).
  bool stop_agreed(bool stop_here) const;
  void grow(const GrowthStage& stage);
  void step(bool stop_here);
  torch::Tensor forward_backward(double* data_seconds);
  void read_back();
  void on_nonfinite(const StepResult& result, double loss);
  void report_progress(bool evaluated);
  double evaluate(double wall);  // at the current step
  bool evaluate_if_due();
  void save();
  TrainProgress progress_of(double lr) const;
  void pace_of(TrainProgress& progress) const;
  void govern_threads();
  // Helpers.
  bool due(std::int64_t every) const { return state_.step % every == 0 || state_.step == plan_.total_steps; }
  double wall() const { return wall_before_ + seconds_since(process_start_); }
  void say(const std::string& message) { observers_.message(message); }
  void event(const std::string& kind, std::int64_t step, const std::string& payload) {
    observers_.event(kind, step, payload);
  }
  // A value at the current step, or at the given counters; metrics are rank 0's alone.
  void metric(const std::string& key, double value, double wall) {
    metric_at(key, value, wall, state_.step, state_.tokens, state_.flops);
  }
  void metric_at(const std::string& key, double value, double wall, std::int64_t step, std::int64_t tokens,
                 double flops) {
    if (writer_) observers_.metric(key.c_str(), step, tokens, flops, wall, value);
  }
  void flush_metrics() {
    if (metrics_) metrics_->flush();
  }

  const Registry& registry_;
  const TrainOptions& options_;
  RunConfig config_;  // its [model] follows the growth events
  const TrainConfig& train_ = config_.train;
  const ModelFamily& family_;
  TrainPlan plan_;
  torch::Device device_;
  Precision precision_;
  // Data parallelism: this rank trains on rows [first_row_, first_row_ + local_B_) of each
  // global batch; rank 0 alone writes.
  DistGroup* const dist_;
  int rank_ = 0, world_ = 1;
  bool writer_ = true;
  std::int64_t local_B_ = 0, first_row_ = 0;
  // Each step's batch as it is trained: accum_ micro-batches of micro_batch_ sequences, and
  // validation in eval_batches_ batches of micro_batch_ (the same windows as
  // train.eval_batches × train.batch_size): train.grad_accum's, or what "auto" chose.
  std::int64_t micro_batch_ = 0, accum_ = 1, eval_batches_ = 0;
  std::string split_note_;  // what "auto" chose, said once the observers listen
  std::string checkpoint_dir_;

  std::unique_ptr<TaskData> data_;
  TrainState state_;
  bool started_from_checkpoint_ = false;
  std::optional<MaskedTokenHold> held_;
  std::vector<GrowthStage> stages_;
  std::optional<MetricLog> metrics_;  // metrics.jsonl, on rank 0
  RunObservers observers_;            // the caller's, then metrics.jsonl
  TrainSummary summary_;
  StepTimes times_;                        // this process's steps: the one source of tokens/s, MFU and the ETA
  std::vector<StepResult> pending_;        // steps not yet read back (train.log_every)
  std::vector<TrainProgress> unreported_;  // read back, not yet given to the observers
  double step_wall_ = 0;                   // the last step's StepResult::wall
  double comm_seconds_ = 0;
  bool peers_stop_ = false;                 // a rank was asked to stop (agreed at the last step's all-reduce)
  std::optional<ThreadGovernor> governor_;  // its first window starts with the loop
  std::optional<StepProfiler> profiler_;    // tfw train --profile
  double wall_before_ = 0;                  // the run's wall time before this process
  Clock::time_point process_start_;
};

}  // namespace tfw::train_impl
