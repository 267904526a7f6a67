// The training loop. See trainer.h. Shapes: B batch, T sequence length, V vocabulary.
//
// A Trainer (engine/train/trainer_impl.h) is set up in its constructor (data, model,
// optimiser) and by restore() (a checkpoint, or rank 0's state), in
// engine/train/trainer_setup.cpp; run() is then the loop, top to bottom: grow when the
// schedule says, step, read the steps back, evaluate and save when due, report. What a step
// changes is the TrainState; checkpoints store it and resume restores it.
//
// A step does not wait for the device: its loss and gradient norm stay there, a non-finite
// loss drops the update there (the fused optimiser's found_inf), and every train.log_every
// steps one copy brings the pending steps' values back (and before an evaluation, a growth,
// a checkpoint or a stop). Their metrics and progress are then written, in step order, with
// each step's own counters and wall time: the same records as a read-back after every step.
#include "engine/train/trainer.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <ATen/record_function.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/dist/dist_group.h"
#include "engine/core/error.h"
#include "engine/nn/growth.h"
#include "engine/machine/runtime.h"
#include "engine/nn/token_use.h"
#include "engine/config/schedule.h"
#include "engine/train/trainer_impl.h"

namespace tfw {

namespace train_impl {

namespace {
// Gradients are averaged in buckets of at most this many bytes (as DDP's default).
constexpr std::int64_t kBucketBytes = 25 << 20;
}  // namespace

TrainSummary Trainer::run() {
  restore();
  prepare();
  // This process's time starts here, so that its breakdown (steps, data, evaluation,
  // checkpoints, growth) adds up to it: the first evaluation of a grown start is part of it.
  wall_before_ = state_.wall_seconds;
  process_start_ = Clock::now();
  announce();
  governor_.emplace();
  if (options_.profile_steps > 0 && writer_) {  // after its warm-up, in the run's folder
    profiler_.emplace(state_.step + kProfileWarmupSteps + 1, options_.profile_steps, train_.device.is_cuda(),
                      options_.run_dir + "/profile");
  }
  while (state_.step < plan_.total_steps) {
    const bool stop_here = options_.stop != nullptr && options_.stop->load();
    if (stop_agreed(stop_here)) {
      summary_.interrupted = true;
      break;
    }
    state_.model->set_training_step(state_.step);
    while (state_.next_stage < stages_.size() && stages_[state_.next_stage].event.at_step == state_.step) {
      grow(stages_[state_.next_stage++]);
    }
    if (profiler_) profiler_->before_step(state_.step + 1);
    step(stop_here);
    if (profiler_ && profiler_->after_step(state_.step)) say(profile_table(profiler_->report()));
    const bool evaluated = evaluate_if_due();  // reads the steps back first
    if (state_.step % train_.log_every == 0 || due(train_.checkpoint_every)) read_back();
    flush_metrics();
    state_.wall_seconds = wall();
    if (due(train_.checkpoint_every)) save();
    report_progress(evaluated);
    govern_threads();
  }
  read_back();
  report_progress(false);
  state_.wall_seconds = wall();
  if (summary_.interrupted) {
    save();
    say(fmt::format("stopped at step {}/{}; checkpoint {}", state_.step, plan_.total_steps, summary_.last_checkpoint));
  }
  return finish();
}

// Ranks stop together, at the step after one of them was asked to.
bool Trainer::stop_agreed(bool stop_here) const { return dist_ == nullptr ? stop_here : peers_stop_; }

// A growth event: evaluate, grow, carry the optimiser on as the options say, evaluate.
void Trainer::grow(const GrowthStage& stage) {
  read_back();
  report_progress(false);
  const auto started = Clock::now();
  const double before = data_->validation_loss(*state_.model, eval_batches_, precision_, dist_);
  state_.model = stage.method->apply(*state_.model, family_, *stage.from, *stage.to, stage.event.options,
                                     train_.seed + static_cast<std::uint64_t>(stage.event.at_step));
  state_.model->to(device_);  // a no-op for growth that keeps the model's tensors
  state_.model->set_training_step(state_.step);
  mask_apply(*state_.model, train_.mask, train_.mask.use);  // grown tokens outside the used ranges are masked
  held_->refresh(*state_.model);
  state_.fused->steps_write_back();
  if (stage.extends_optimizer) {
    optimizer_extend_rows(*state_.optimizer);
  } else {
    state_.optimizer = make_optimizer();
  }
  state_.fused.emplace(*state_.optimizer);
  state_.parameters = state_.model->parameters();
  config_.model.spec = stage.to;
  plan_.flops_per_step = static_cast<double>(stage.to->flops_per_token(plan_.seq_len).training_per_example()) *
                         static_cast<double>(plan_.examples_per_step);
  if (stage.restarts_schedule) state_.restart_step = stage.event.at_step;
  const double after = data_->validation_loss(*state_.model, eval_batches_, precision_, dist_);
  event("growth", state_.step,
        fmt::format(R"({{"method":"{}","from":"{}","to":"{}","parameters":{},"loss_before":{:.9g},)"
                    R"("loss_after":{:.9g},"optimizer":"{}","exact":{}}})",
                    stage.method->name(), stage.from->summary(), stage.to->summary(), stage.to->parameter_count(),
                    before, after, stage.extends_optimizer ? "extend" : "reset", stage.plan.exact ? "true" : "false"));
  const double wall = state_.wall_seconds;
  metric("growth/loss_before", before, wall);
  metric("growth/loss_after", after, wall);
  metric("growth/parameters", static_cast<double>(stage.to->parameter_count()), wall);
  summary_.growth_events += 1;
  say(fmt::format("step {}: {} grew {} -> {} ({} parameters); val loss {:.4f} -> {:.4f}", state_.step,
                  stage.method->name(), stage.from->summary(), stage.to->summary(), stage.to->parameter_count(), before,
                  after));
  summary_.growth_seconds += seconds_since(started);
}

// One optimiser step over accum_ micro-batches (and, data-parallel, the ranks):
// the update, dropped on the device if the loss is not finite; the counters. Its loss and
// gradient norm wait in pending_ for the next read-back.
void Trainer::step(bool stop_here) {
  RECORD_USER_SCOPE("tfw::step");  // the profiler's (engine/train/profile.h), as tfw::optimizer and tfw::data
  const auto step_start = Clock::now();
  StepResult result;
  result.step_before = state_.step;
  result.tokens_before = state_.tokens;
  result.flops_before = state_.flops;
  result.lr = growth_lr(train_, plan_, state_.step, state_.restart_step);
  for (auto& group : state_.optimizer->param_groups()) {  // as checkpoints record it
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(result.lr);
  }
  state_.optimizer->zero_grad();
  double data_seconds = 0;
  result.loss = forward_backward(&data_seconds);
  if (dist_ != nullptr) {
    // The mean gradient over the ranks is the gradient of the global batch's mean loss (each
    // rank's share has the same size); the loss and the stop requests go with it.
    const auto comm_start = Clock::now();
    dist_->average_gradients(state_.parameters, kBucketBytes);
    std::vector<torch::Tensor> shared{
        torch::stack({result.loss.to(torch::kCPU), torch::tensor(stop_here ? 1.0 : 0.0, torch::kFloat64)})};
    dist_->allreduce_sum(shared, "the all-reduce of the loss");
    result.loss = shared[0][0] / static_cast<double>(world_);
    peers_stop_ = shared[0][1].item<double>() > 0;
    comm_seconds_ += seconds_since(comm_start);
  }
  result.wall = wall();
  step_wall_ = result.wall;
  {
    RECORD_USER_SCOPE("tfw::optimizer");
    const torch::Tensor skip = result.loss.isfinite().logical_not().to(device_, torch::kFloat32);
    result.grad_norm = gradients_clip_on_device(state_.parameters, train_.grad_clip);
    held_->save();
    state_.fused->step(result.lr, skip);
    held_->restore();
  }
  state_.step += 1;
  state_.tokens += plan_.tokens_per_step;
  state_.examples += plan_.examples_per_step;
  state_.flops += plan_.flops_per_step;
  times_.add(seconds_since(step_start) - data_seconds, data_seconds);
  result.step = state_.step;
  result.tokens = state_.tokens;
  result.flops = state_.flops;
  result.progress = progress_of(result.lr);
  pending_.push_back(std::move(result));
}

// The micro-batches' forward and backward passes; returns the step's mean loss, in float64 on
// the device (summed as the losses' doubles would be on the host).
torch::Tensor Trainer::forward_backward(double* data_seconds) {
  torch::Tensor loss = torch::zeros({}, torch::TensorOptions(torch::kFloat64).device(device_));
  for (std::int64_t micro = 0; micro < accum_; ++micro) {
    const auto draw_start = Clock::now();
    const Batch batch = data_->next(micro_batch_, first_row_, local_B_);
    *data_seconds += seconds_since(draw_start);
    torch::Tensor micro_loss = data_->loss(*state_.model, batch, precision_) / static_cast<double>(accum_);
    micro_loss.backward();
    loss = loss + micro_loss.detach().to(torch::kFloat64);
  }
  return loss;
}

// The pending steps' losses and gradient norms, in one copy from the device; then each step's
// train/* metrics (a non-finite loss first goes to on_nonfinite, and its gradient norm is
// recorded as NaN: the update was dropped). Their progress waits for report_progress.
void Trainer::read_back() {
  if (pending_.empty()) return;
  std::vector<torch::Tensor> values;
  for (const StepResult& r : pending_) {
    values.push_back(r.loss.to(torch::kFloat64));
    values.push_back(r.grad_norm.to(r.loss.device(), torch::kFloat64));
  }
  const auto wait_start = Clock::now();
  const torch::Tensor copied = torch::stack(values).to(torch::kCPU);  // waits for the device
  times_.add_wait(seconds_since(wait_start));
  const double* read = copied.data_ptr<double>();
  std::vector<StepResult> steps = std::move(pending_);
  pending_.clear();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    StepResult& r = steps[i];
    const double loss = read[2 * i];
    const double grad_norm = std::isfinite(loss) ? read[2 * i + 1] : kNaN;
    if (!std::isfinite(loss)) on_nonfinite(r, loss);
    state_.train_loss = loss;
    metric_at("train/loss", loss, r.wall, r.step, r.tokens, r.flops);
    metric_at("train/lr", r.lr, r.wall, r.step, r.tokens, r.flops);
    metric_at("train/grad_norm", grad_norm, r.wall, r.step, r.tokens, r.flops);
    r.progress.loss = loss;
    r.progress.grad_norm = grad_norm;
    unreported_.push_back(std::move(r.progress));
  }
}

// A NaN or infinite loss, found at a read-back: recorded at the step whose update it dropped,
// then train.nan_policy: "stop" raises (the steps after it, up to train.log_every - 1, ran but
// are neither recorded nor saved), "skip" goes on (the step still counts).
void Trainer::on_nonfinite(const StepResult& result, double loss) {
  metric_at("event/nonfinite_loss", loss, result.wall, result.step_before, result.tokens_before, result.flops_before);
  flush_metrics();
  event("nan", result.step_before,
        fmt::format(R"({{"loss":"{}","policy":"{}"}})", loss, nan_policy_name(train_.nan_policy)));
  if (train_.nan_policy == NanPolicy::stop) {
    throw Error(with_hint(fmt::format("loss is {} at step {} (read back after step {}); stopped "
                                      "(train.nan_policy = \"stop\")",
                                      loss, result.step_before, state_.step),
                          "lower train.lr, raise train.warmup_steps, or set train.nan_policy = \"skip\"; "
                          "resume from the last checkpoint with tfw train --resume"));
  }
}

// The read-back steps' progress, to the observers; the last one ran the evaluation, if any.
void Trainer::report_progress(bool evaluated) {
  for (std::size_t i = 0; i < unreported_.size(); ++i) {
    TrainProgress& progress = unreported_[i];
    if (evaluated && i + 1 == unreported_.size()) {
      progress.evaluated = true;
      progress.val_loss = state_.val_loss;
      progress.val_metrics = summary_.val_metrics;
    }
    progress.eval_seconds = summary_.eval_seconds;
    progress.checkpoint_seconds = summary_.checkpoint_seconds;
    pace_of(progress);
    observers_.progress(progress);
  }
  unreported_.clear();
}

// One evaluation: every validation metric of the task (the loss first, returned), recorded as
// val/KEY.
double Trainer::evaluate(double wall) {
  const auto started = Clock::now();
  TokenUseMeter token_use(*state_.model);  // a grown model: how it uses its appended tokens
  std::optional<ScoreCapture> capture;
  if (!token_use.empty()) capture.emplace(token_use.sink());
  const std::vector<Metric> results = data_->validate(*state_.model, eval_batches_, precision_, dist_);
  capture.reset();
  for (const Metric& m : results) metric("val/" + m.key, m.value, wall);
  for (const Metric& m : token_use.metrics()) metric(m.key, m.value, wall);
  summary_.val_metrics = results;
  summary_.eval_seconds += seconds_since(started);
  return results.front().value;
}

// The evaluation every train.eval_every steps and at the last, after the steps are read
// back; true if it ran.
bool Trainer::evaluate_if_due() {
  if (!due(train_.eval_every)) return false;
  read_back();
  state_.model->set_training_step(state_.step);  // the model after state_.step steps
  state_.val_loss = evaluate(step_wall_);
  state_.best_val_loss = std::min(state_.best_val_loss, state_.val_loss);
  event("evaluation", state_.step, evaluation_payload(state_.val_loss, state_.tokens, summary_.val_metrics));
  return true;
}

// A checkpoint of the TrainState (rank 0), then pruning to train.keep_checkpoints.
void Trainer::save() {
  read_back();
  if (!writer_) return;
  const auto started = Clock::now();
  state_.fused->steps_write_back();  // the step counts, into the AdamW state it saves
  // The store commits the metrics up to here before the checkpoint exists: a crash after it
  // becomes valid cannot lose them (resume rewrites only the steps after it).
  observers_.before_checkpoint();
  state_.sampler_state = data_->sampler_state();
  state_.config_toml = run_config_text(config_);
  state_.threads = runtime_active_threads();
  state_.cpu_capability = train_.device.is_cuda() ? "" : cpu_capability();
  state_.micro_batch = train_.grad_accum_auto ? micro_batch_ : 0;
  CheckpointInfo saved = checkpoint_save(checkpoint_dir_, *state_.model, state_.optimizer.get(), state_);
  summary_.last_checkpoint = saved.path;
  observers_.checkpoint({saved.path, saved.step, saved.crc32, saved.size});
  for (const std::string& removed : checkpoint_prune(checkpoint_dir_, train_.keep_checkpoints)) {
    observers_.checkpoint_removed(removed);
  }
  summary_.checkpoint_seconds += seconds_since(started);
}

// What the user watches after a step; its pace comes when it is reported (pace_of).
TrainProgress Trainer::progress_of(double lr) const {
  TrainProgress progress;
  progress.step = state_.step;
  progress.total_steps = plan_.total_steps;
  progress.tokens = state_.tokens;
  progress.examples = state_.examples;
  progress.flops = state_.flops;
  progress.lr = lr;
  progress.val_loss = state_.val_loss;
  progress.elapsed_seconds = wall();
  progress.threads = runtime_active_threads();
  progress.world_size = world_;
  return progress;
}

// The pace, as measured when the steps are reported: a window that holds the last read-back's
// wait for the device (StepTimes::add_wait), so that the steps launched between two
// read-backs do not show the speed of their launches.
void Trainer::pace_of(TrainProgress& progress) const {
  progress.tokens_per_second = times_.tokens_per_second(static_cast<double>(plan_.tokens_per_step), true);
  progress.mfu = times_.mfu(plan_.flops_per_step, summary_.peak_flops, true);
  progress.eta_seconds = times_.eta_seconds(plan_.total_steps - progress.step);
  progress.step_seconds = times_.recent_step_mean();
  progress.data_seconds = times_.recent_wall_mean() - times_.recent_step_mean();
  progress.comm_seconds = comm_seconds_ / static_cast<double>(times_.steps());
}

// The ThreadGovernor lowers the thread count when the machine is oversubscribed.
void Trainer::govern_threads() {
  std::optional<std::string> change = governor_->update();
  if (!change) return;
  summary_.thread_changes += 1;
  say(fmt::format("step {}: {}", state_.step, *change));
  event("threads", state_.step, nlohmann::json{{"threads", runtime_active_threads()}, {"reason", *change}}.dump());
}

}  // namespace train_impl

TrainSummary train_run(const Registry& registry, const RunConfig& config, const TrainOptions& options) {
  return train_impl::Trainer(registry, config, options).run();
}

}  // namespace tfw
