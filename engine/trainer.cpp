// The training loop. See trainer.h. Shapes: B batch, T sequence length, V vocabulary.
//
// A Trainer is set up in its constructor (data, model, optimiser) and by restore() (a
// checkpoint, or rank 0's state); run() is then the loop, top to bottom: grow when the
// schedule says, step, evaluate and save when due, report. What a step changes is the
// TrainState; checkpoints store it and resume restores it.
#include "engine/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "engine/checkpoint.h"
#include "engine/device.h"
#include "engine/dist_group.h"
#include "engine/error.h"
#include "engine/growth.h"
#include "engine/load.h"
#include "engine/mask.h"
#include "engine/model.h"
#include "engine/peak.h"
#include "engine/registry.h"
#include "engine/runtime.h"
#include "engine/token_use.h"
#include "engine/train/growth_stages.h"
#include "engine/train/metric_log.h"
#include "engine/train/observers.h"
#include "engine/train/profile.h"
#include "engine/train/optim.h"
#include "engine/train/schedule.h"
#include "engine/train/step_times.h"
#include "engine/train/task_data.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
using AdamW = torch::optim::AdamW;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Gradients are averaged in buckets of at most this many bytes (as DDP's default).
constexpr std::int64_t kBucketBytes = 25 << 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


// An "evaluation" event's payload: the loss, the tokens, and the headline metrics (accuracy).
std::string evaluation_payload(double val_loss, std::int64_t tokens, const std::vector<Metric>& metrics) {
  std::string out = fmt::format(R"({{"val_loss":{:.9g},"tokens":{})", val_loss, tokens);
  for (const Metric& m : metrics) {
    if (m.headline) out += fmt::format(R"(,{}:{:.9g})", nlohmann::json(m.key).dump(), m.value);
  }
  return out + "}";
}

// Everything a step changes: the counters a checkpoint stores (step, tokens, FLOPs, losses,
// lineage, data cursor), the model and its optimiser, and where the growth schedule stands.
struct TrainState : CheckpointMeta {
  std::shared_ptr<Model> model;
  std::unique_ptr<AdamW> optimizer;
  std::vector<torch::Tensor> parameters;  // model->parameters(), renewed at each growth
  std::int64_t restart_step = 0;          // the last learning-rate schedule restart (0: none)
  std::size_t next_stage = 0;             // the next growth stage to apply
};

// One optimiser step, as measured.
struct StepResult {
  double loss = 0, lr = 0, grad_norm = kNaN;
  double wall = 0;  // the run's wall time when the update was computed
};

class Trainer {
 public:
  Trainer(const Registry& registry, const RunConfig& config, const TrainOptions& options);
  TrainSummary run();

 private:
  // Setting up.
  void open_data();
  void restore();
  void resume();
  void start_from(const std::string& checkpoint);
  void share_rank0_state(bool optimizer_loaded);
  void prepare();
  void announce();
  // The loop's parts.
  bool stop_agreed(bool stop_here) const;
  void grow(const GrowthStage& stage);
  StepResult step(bool stop_here);
  double forward_backward(double* data_seconds);
  void on_nonfinite(double loss, double wall);
  double evaluate(double wall);  // at the current step
  bool evaluate_if_due(const StepResult& result);
  void save();
  TrainProgress progress_of(const StepResult& result) const;
  void govern_threads();
  TrainSummary finish();
  // Helpers.
  std::unique_ptr<AdamW> make_optimizer() const;
  bool due(std::int64_t every) const { return state_.step % every == 0 || state_.step == plan_.total_steps; }
  double wall() const { return wall_before_ + seconds_since(process_start_); }
  void say(const std::string& message) { observers_.message(message); }
  void event(const std::string& kind, std::int64_t step, const std::string& payload) {
    observers_.event(kind, step, payload);
  }
  // A value at the current step; metrics are rank 0's alone.
  void metric(const std::string& key, double value, double wall) {
    if (writer_) observers_.metric(key.c_str(), state_.step, state_.tokens, state_.flops, wall, value);
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
  std::string checkpoint_dir_;

  std::unique_ptr<TaskData> data_;
  TrainState state_;
  bool started_from_checkpoint_ = false;
  std::optional<MaskedTokenHold> held_;
  std::vector<GrowthStage> stages_;
  std::optional<MetricLog> metrics_;  // metrics.jsonl, on rank 0
  RunObservers observers_;  // the caller's, then metrics.jsonl
  TrainSummary summary_;
  StepTimes times_;  // this process's steps: the one source of tokens/s, MFU and the ETA
  double comm_seconds_ = 0;
  bool peers_stop_ = false;  // a rank was asked to stop (agreed at the last step's all-reduce)
  std::optional<ThreadGovernor> governor_;  // its first window starts with the loop
  std::optional<StepProfiler> profiler_;     // tfw train --profile
  double wall_before_ = 0;  // the run's wall time before this process
  Clock::time_point process_start_;
};

Trainer::Trainer(const Registry& registry, const RunConfig& config, const TrainOptions& options)
    : registry_(registry),
      options_(options),
      config_(config),
      family_(registry.family(config.model.family)),
      plan_(train_plan(config)),
      device_(torch::kCPU),
      precision_(config.train.precision),
      dist_(options.dist.get()) {
  train_memory_check(config_, plan_);
  device_ = device_resolve(train_.device.text());  // a UsageError before any work
  if (device_.is_cuda()) cuda_set_tf32(train_.tf32);  // fp32 means fp32 unless asked
  if (dist_ != nullptr) {
    rank_ = dist_->rank();
    world_ = dist_->world();
  }
  writer_ = rank_ == 0;
  const std::int64_t B = train_.batch_size;
  if (B % world_ != 0) {
    throw UsageError(with_hint(fmt::format("train.batch_size = {} does not split evenly over {} ranks", B, world_),
                               fmt::format("choose a batch size that is a multiple of {}, or another number of ranks",
                                           world_)));
  }
  local_B_ = B / world_;
  first_row_ = rank_ * local_B_;
  observers_.add(options_.observer);
  open_data();
  state_.model = family_.build(*config_.model.spec, train_.seed);
  state_.model->to(device_);
  state_.optimizer = make_optimizer();
  checkpoint_dir_ = options_.run_dir + "/checkpoints";
  if (writer_) fs::create_directories(checkpoint_dir_);
  state_.val_loss = kNaN;
  state_.best_val_loss = std::numeric_limits<double>::infinity();
}

// Data (engine/train/task_data.h). Rank 0 prepares it first; the others then find it prepared (in
// a shared TFW_HOME) or prepare their own copy.
void Trainer::open_data() {
  if (dist_ != nullptr && !writer_) dist_->barrier("waiting for rank 0 to prepare the data");
  std::function<void(const std::string&)> progress;
  if (writer_) progress = [this](const std::string& message) { say(message); };
  data_ = task_data_open(config_, options_.home, train_.batch_size, plan_.seq_len, train_.seed, progress);
  if (dist_ != nullptr && writer_) dist_->barrier("waiting for rank 0 to prepare the data");
}

std::unique_ptr<AdamW> Trainer::make_optimizer() const {
  return std::make_unique<AdamW>(optimizer_groups(*state_.model, train_), torch::optim::AdamWOptions(train_.lr));
}

// The checkpoint to continue from or start from (rank 0), then rank 0's state on every rank.
void Trainer::restore() {
  bool optimizer_loaded = false;
  if (writer_ && options_.resume) {
    resume();
    optimizer_loaded = true;
  } else if (writer_ && !options_.init_from.empty()) {
    start_from(options_.init_from);
  }
  started_from_checkpoint_ = !options_.init_from.empty();
  if (dist_ != nullptr) share_rank0_state(optimizer_loaded);
}

// The newest checkpoint that verifies. Newer damaged ones are said out loud, recorded as an
// event and moved aside (*.damaged, kept for inspection), so that the run rewrites those steps.
void Trainer::resume() {
  std::vector<std::string> skipped;
  const CheckpointInfo latest = checkpoint_latest_valid(checkpoint_dir_, &skipped);
  checkpoint_set_aside_newer(checkpoint_dir_, latest.step);
  for (const std::string& why : skipped) {
    say(fmt::format("warning: skipped a damaged checkpoint (moved aside as *.damaged): {}", why));
    event("checkpoint_damaged", latest.step, nlohmann::json({{"reason", why}}).dump());
  }
  static_cast<CheckpointMeta&>(state_) = checkpoint_load(latest.path, *state_.model, state_.optimizer.get());
  if (state_.examples < 0) state_.examples = state_.tokens / data_->tokens_per_example();  // an older checkpoint
  data_->sampler_restore(state_.sampler_state);
  say(fmt::format("resumed {} at step {} ({} tokens)", latest.path, state_.step, state_.tokens));
  for (const std::string& note : resume_machine_notes(state_, !train_.device.is_cuda(), dist_ != nullptr)) say(note);
}

// A new run from a grown checkpoint's weights: its lineage carries over, its counters do not.
void Trainer::start_from(const std::string& checkpoint) {
  CheckpointMeta origin = checkpoint_load(checkpoint, *state_.model, nullptr);
  state_.inherited_flops = origin.inherited_flops + origin.flops;
  state_.parent_run = origin.parent_run;
  state_.parent_checkpoint = origin.parent_checkpoint.empty() ? checkpoint : origin.parent_checkpoint;
  state_.growth_method = origin.growth_method;
  state_.growth_options = origin.growth_options;
  say(fmt::format("initialised from {} (inherits {:.3e} FLOPs)", checkpoint, state_.inherited_flops));
}

// Rank 0's weights, optimiser state, counters and data cursor, on every rank: the ranks need
// not see the checkpoint's file system, and they start identical.
void Trainer::share_rank0_state(bool optimizer_loaded) {
  dist_->share_module(*state_.model);
  nlohmann::json counters = {{"step", state_.step},         {"tokens", state_.tokens},
                             {"examples", state_.examples}, {"flops", state_.flops},
                             {"wall_seconds", state_.wall_seconds}, {"sampler", data_->sampler_state()},
                             {"optimizer", optimizer_loaded}, {"init_from", started_from_checkpoint_}};
  counters = nlohmann::json::parse(dist_->broadcast_string(counters.dump(), "sending rank 0's counters"));
  if (!writer_) {
    state_.step = counters["step"];
    state_.tokens = counters["tokens"];
    state_.examples = counters["examples"];
    state_.flops = counters["flops"];
    state_.wall_seconds = counters["wall_seconds"];
    data_->sampler_restore(counters["sampler"]);
    started_from_checkpoint_ = counters["init_from"];
  }
  if (counters["optimizer"].get<bool>()) dist_->share_optimizer(*state_.optimizer, device_);
}

// The mask, the growth schedule from here on, the run folder's config and metrics, the peak.
void Trainer::prepare() {
  // A parameter mask (train.mask.use): the masked tokens take no part and stay as they are.
  if (!train_.mask.use.empty()) say(mask_apply(*state_.model, train_.mask, train_.mask.use));
  held_.emplace(*state_.model);
  stages_ = growth_stages(registry_, config_, state_.step, plan_.total_steps);
  state_.restart_step = growth_restart_step(config_, state_.step - 1, plan_.total_steps);
  state_.config_toml = run_config_text(config_);
  if (writer_) std::ofstream(options_.run_dir + "/config.toml") << "# resolved run config\n" << state_.config_toml << "\n";
  if (writer_) {
    metrics_.emplace(options_.run_dir + "/metrics.jsonl");
    observers_.add(&*metrics_);
  }
  summary_.inherited_flops = state_.inherited_flops;
  // MFU is over the world's peak: each rank's threads have the peak rank 0 measured (or took
  // from TFW_HOME/machine.toml) for its own thread count.
  summary_.peak_flops =
      writer_ ? peak_flops_resolve(options_.home, train_.peak_flops, train_.device, train_.precision) : 0;
  if (dist_ != nullptr) {
    std::vector<torch::Tensor> peak{torch::tensor({summary_.peak_flops}, torch::kFloat64)};
    dist_->broadcast(peak, "sending rank 0's peak FLOP/s");
    summary_.peak_flops = peak[0].item<double>() * static_cast<double>(world_);
  }
  state_.parameters = state_.model->parameters();
}

// Before the first step: a run started from a grown checkpoint is evaluated, so that its
// validation curve starts where the growth happened (no gap on cumulative FLOPs; the
// evaluation reads fixed windows and draws no random numbers, so training is unchanged).
// Then what produced the numbers from here on (issue 34): a resume on another machine,
// LibTorch or thread count adds its own event, and reports warn when a group's runs differ.
void Trainer::announce() {
  if (started_from_checkpoint_ && state_.step == 0) {
    state_.val_loss = evaluate(0);  // step 0: no tokens, no FLOPs, no time yet
    flush_metrics();
    event("evaluation", 0, evaluation_payload(state_.val_loss, 0, summary_.val_metrics));
  }
  if (dist_ != nullptr) {
    event("distributed", state_.step,
          nlohmann::json{{"world_size", world_}, {"backend", "gloo"}, {"per_rank_batch", local_B_},
                         {"global_batch", train_.batch_size}, {"source", dist_->env().source},
                         {"master", fmt::format("{}:{}", dist_->env().master_addr, dist_->env().master_port)}}
              .dump());
  }
  if (options_.observer == nullptr) return;
  nlohmann::json provenance = {{"libtorch", torch_version()},
                               {"cuda", torch_cuda_version()},
                               {"device", train_.device.text()},
                               {"processor", compute_device_name(train_.device.text())},
                               {"threads", runtime_threads()},
                               {"precision", precision_name(train_.precision)},
                               {"world_size", world_}};
  if (train_.device.is_cuda()) provenance["tf32"] = train_.tf32;
  else provenance["cpu_capability"] = cpu_capability();
  for (const auto& [key, value] : options_.provenance) provenance[key] = value;
  event("provenance", state_.step, provenance.dump());
}

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
    const StepResult result = step(stop_here);
    if (profiler_ && profiler_->after_step(state_.step)) say(profile_table(profiler_->report()));
    TrainProgress progress = progress_of(result);
    progress.evaluated = evaluate_if_due(result);
    progress.val_loss = state_.val_loss;
    if (progress.evaluated) progress.val_metrics = summary_.val_metrics;
    flush_metrics();
    state_.wall_seconds = wall();
    if (due(train_.checkpoint_every)) save();
    progress.eval_seconds = summary_.eval_seconds;
    progress.checkpoint_seconds = summary_.checkpoint_seconds;
    observers_.progress(progress);
    govern_threads();
  }
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
  const auto started = Clock::now();
  const double before = data_->validation_loss(*state_.model, train_.eval_batches, precision_, dist_);
  state_.model = stage.method->apply(*state_.model, family_, *stage.from, *stage.to, stage.event.options,
                                     train_.seed + static_cast<std::uint64_t>(stage.event.at_step));
  state_.model->to(device_);  // a no-op for growth that keeps the model's tensors
  state_.model->set_training_step(state_.step);
  mask_apply(*state_.model, train_.mask, train_.mask.use);  // grown tokens outside the used ranges are masked
  held_->refresh(*state_.model);
  if (stage.extends_optimizer) {
    optimizer_extend_rows(*state_.optimizer);
  } else {
    state_.optimizer = make_optimizer();
  }
  state_.parameters = state_.model->parameters();
  config_.model.spec = stage.to;
  plan_.flops_per_step = static_cast<double>(stage.to->flops_per_token(plan_.seq_len).training_per_example()) *
                         static_cast<double>(plan_.examples_per_step);
  if (stage.restarts_schedule) state_.restart_step = stage.event.at_step;
  const double after = data_->validation_loss(*state_.model, train_.eval_batches, precision_, dist_);
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
                  stage.method->name(), stage.from->summary(), stage.to->summary(), stage.to->parameter_count(),
                  before, after));
  summary_.growth_seconds += seconds_since(started);
}

// One optimiser step over train.grad_accum micro-batches (and, data-parallel, the ranks):
// the update, unless the loss is not finite; the counters; the train/* metrics.
StepResult Trainer::step(bool stop_here) {
  RECORD_USER_SCOPE("tfw::step");  // the profiler's (engine/train/profile.h), as tfw::optimizer and tfw::data
  const auto step_start = Clock::now();
  StepResult result;
  result.lr = growth_lr(train_, plan_, state_.step, state_.restart_step);
  for (auto& group : state_.optimizer->param_groups()) {
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
    std::vector<torch::Tensor> shared{torch::tensor({result.loss, stop_here ? 1.0 : 0.0}, torch::kFloat64)};
    dist_->allreduce_sum(shared, "the all-reduce of the loss");
    result.loss = shared[0][0].item<double>() / static_cast<double>(world_);
    peers_stop_ = shared[0][1].item<double>() > 0;
    comm_seconds_ += seconds_since(comm_start);
  }
  result.wall = wall();
  if (std::isfinite(result.loss)) {
    RECORD_USER_SCOPE("tfw::optimizer");
    result.grad_norm = gradients_clip(state_.parameters, train_.grad_clip);
    held_->save();
    state_.optimizer->step();
    held_->restore();
  } else {
    on_nonfinite(result.loss, result.wall);
  }
  state_.step += 1;
  state_.tokens += plan_.tokens_per_step;
  state_.examples += plan_.examples_per_step;
  state_.flops += plan_.flops_per_step;
  state_.train_loss = result.loss;
  times_.add(seconds_since(step_start) - data_seconds, data_seconds);
  metric("train/loss", result.loss, result.wall);
  metric("train/lr", result.lr, result.wall);
  metric("train/grad_norm", result.grad_norm, result.wall);
  return result;
}

// The micro-batches' forward and backward passes; returns the step's mean loss.
double Trainer::forward_backward(double* data_seconds) {
  double loss = 0;
  for (std::int64_t micro = 0; micro < train_.grad_accum; ++micro) {
    const auto draw_start = Clock::now();
    const Batch batch = data_->next(train_.batch_size, first_row_, local_B_);
    *data_seconds += seconds_since(draw_start);
    torch::Tensor micro_loss = data_->loss(*state_.model, batch, precision_) / static_cast<double>(train_.grad_accum);
    micro_loss.backward();
    loss += micro_loss.item<double>();
  }
  return loss;
}

// A NaN or infinite loss: recorded, then train.nan_policy: "stop" raises, "skip" drops the
// update (the step still counts).
void Trainer::on_nonfinite(double loss, double wall) {
  metric("event/nonfinite_loss", loss, wall);
  flush_metrics();
  event("nan", state_.step, fmt::format(R"({{"loss":"{}","policy":"{}"}})", loss, nan_policy_name(train_.nan_policy)));
  if (train_.nan_policy == NanPolicy::stop) {
    throw Error(with_hint(fmt::format("loss is {} at step {}; stopped (train.nan_policy = \"stop\")", loss,
                                      state_.step),
                          "lower train.lr, raise train.warmup_steps, or set train.nan_policy = \"skip\"; "
                          "resume from the last checkpoint with tfw train --resume"));
  }
  state_.optimizer->zero_grad();
}

// One evaluation: every validation metric of the task (the loss first, returned), recorded as
// val/KEY.
double Trainer::evaluate(double wall) {
  const auto started = Clock::now();
  TokenUseMeter token_use(*state_.model);  // a grown model: how it uses its appended tokens
  std::optional<ScoreCapture> capture;
  if (!token_use.empty()) capture.emplace(token_use.sink());
  const std::vector<Metric> results = data_->validate(*state_.model, train_.eval_batches, precision_, dist_);
  capture.reset();
  for (const Metric& m : results) metric("val/" + m.key, m.value, wall);
  for (const Metric& m : token_use.metrics()) metric(m.key, m.value, wall);
  summary_.val_metrics = results;
  summary_.eval_seconds += seconds_since(started);
  return results.front().value;
}

// The evaluation every train.eval_every steps and at the last; true if it ran.
bool Trainer::evaluate_if_due(const StepResult& result) {
  if (!due(train_.eval_every)) return false;
  state_.model->set_training_step(state_.step);  // the model after state_.step steps
  state_.val_loss = evaluate(result.wall);
  state_.best_val_loss = std::min(state_.best_val_loss, state_.val_loss);
  event("evaluation", state_.step, evaluation_payload(state_.val_loss, state_.tokens, summary_.val_metrics));
  return true;
}

// A checkpoint of the TrainState (rank 0), then pruning to train.keep_checkpoints.
void Trainer::save() {
  if (!writer_) return;
  const auto started = Clock::now();
  // The store commits the metrics up to here before the checkpoint exists: a crash after it
  // becomes valid cannot lose them (resume rewrites only the steps after it).
  observers_.before_checkpoint();
  state_.sampler_state = data_->sampler_state();
  state_.config_toml = run_config_text(config_);
  state_.threads = runtime_active_threads();
  state_.cpu_capability = train_.device.is_cuda() ? "" : cpu_capability();
  CheckpointInfo saved = checkpoint_save(checkpoint_dir_, *state_.model, state_.optimizer.get(), state_);
  summary_.last_checkpoint = saved.path;
  observers_.checkpoint({saved.path, saved.step, saved.crc32, saved.size});
  for (const std::string& removed : checkpoint_prune(checkpoint_dir_, train_.keep_checkpoints)) {
    observers_.checkpoint_removed(removed);
  }
  summary_.checkpoint_seconds += seconds_since(started);
}

// What the user watches after a step: the recent pace (StepTimes::kWindow steps).
TrainProgress Trainer::progress_of(const StepResult& result) const {
  TrainProgress progress;
  progress.step = state_.step;
  progress.total_steps = plan_.total_steps;
  progress.tokens = state_.tokens;
  progress.examples = state_.examples;
  progress.flops = state_.flops;
  progress.loss = result.loss;
  progress.lr = result.lr;
  progress.grad_norm = result.grad_norm;
  progress.tokens_per_second = times_.tokens_per_second(static_cast<double>(plan_.tokens_per_step), true);
  progress.mfu = times_.mfu(plan_.flops_per_step, summary_.peak_flops, true);
  progress.eta_seconds = times_.eta_seconds(plan_.total_steps - state_.step);
  progress.elapsed_seconds = wall();
  progress.step_seconds = times_.recent_step_mean();
  progress.data_seconds = times_.recent_wall_mean() - times_.recent_step_mean();
  progress.threads = runtime_active_threads();
  progress.comm_seconds = comm_seconds_ / static_cast<double>(times_.steps());
  progress.world_size = world_;
  return progress;
}

// The ThreadGovernor lowers the thread count when the machine is oversubscribed.
void Trainer::govern_threads() {
  std::optional<std::string> change = governor_->update();
  if (!change) return;
  summary_.thread_changes += 1;
  say(fmt::format("step {}: {}", state_.step, *change));
  event("threads", state_.step, nlohmann::json{{"threads", runtime_active_threads()}, {"reason", *change}}.dump());
}

// The summary: the run's counters, and this process's time over every one of its steps.
TrainSummary Trainer::finish() {
  TrainSummary& summary = summary_;
  for (const torch::Tensor& p : state_.model->parameters()) summary.parameters += p.numel();
  summary.steps = state_.step;
  summary.tokens = state_.tokens;
  summary.examples = state_.examples;
  summary.flops = state_.flops;
  summary.train_loss = state_.train_loss;
  summary.val_loss = state_.val_loss;
  summary.best_val_loss = state_.best_val_loss;
  summary.seconds = state_.wall_seconds;
  summary.process_seconds = seconds_since(process_start_);
  summary.step_seconds = times_.step_total();
  summary.data_seconds = times_.data_total();
  summary.comm_seconds = comm_seconds_;
  summary.world_size = world_;
  summary.threads = runtime_active_threads();
  summary.tokens_per_second = times_.tokens_per_second(static_cast<double>(plan_.tokens_per_step), false);
  summary.mfu = times_.mfu(plan_.flops_per_step, summary.peak_flops, false);
  if (summary.last_checkpoint.empty()) {
    std::vector<CheckpointInfo> checkpoints = checkpoint_list(checkpoint_dir_);
    if (!checkpoints.empty()) summary.last_checkpoint = checkpoints.back().path;
  }
  return summary;
}

}  // namespace

TrainSummary train_run(const Registry& registry, const RunConfig& config, const TrainOptions& options) {
  return Trainer(registry, config, options).run();
}

}  // namespace tfw
