// Setting a training up, and its summary at the end: the Trainer's constructor and the parts
// that run before its loop (engine/train/trainer_impl.h; the loop is engine/train/trainer.cpp).
#include <sys/resource.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/checkpoint/checkpoint.h"
#include "engine/machine/device.h"
#include "engine/core/error.h"
#include "engine/dist/dist_group.h"
#include "engine/kernels/cuda/torch_cuda.h"
#include "engine/machine/peak.h"
#include "engine/machine/runtime.h"
#include "engine/config/schedule.h"
#include "engine/machine/memory_check.h"
#include "engine/train/trainer_impl.h"

namespace tfw::train_impl {

namespace fs = std::filesystem;

// An "evaluation" event's payload: the loss, the tokens, and the headline metrics (accuracy).
std::string evaluation_payload(double val_loss, std::int64_t tokens, const std::vector<Metric>& metrics) {
  std::string out = fmt::format(R"({{"val_loss":{:.9g},"tokens":{})", val_loss, tokens);
  for (const Metric& m : metrics) {
    if (m.headline) out += fmt::format(R"(,{}:{:.9g})", nlohmann::json(m.key).dump(), m.value);
  }
  return out + "}";
}

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
  device_ = device_resolve(train_.device.text());     // a UsageError before any work
  if (device_.is_cuda()) cuda_set_tf32(train_.tf32);  // fp32 means fp32 unless asked
  if (dist_ != nullptr) {
    rank_ = dist_->rank();
    world_ = dist_->world();
  }
  writer_ = rank_ == 0;
  split_choose();
  const std::int64_t B = micro_batch_;
  if (B % world_ != 0) {
    throw UsageError(
        with_hint(fmt::format("train.batch_size = {} does not split evenly over {} ranks", B, world_),
                  fmt::format("choose a batch size that is a multiple of {}, or another number of ranks", world_)));
  }
  local_B_ = B / world_;
  first_row_ = rank_ * local_B_;
  observers_.add(options_.observer);
  if (!split_note_.empty()) say(split_note_);
  open_data();
  state_.model = family_.build(*config_.model.spec, train_.seed);
  state_.model->to(device_);
  state_.optimizer = make_optimizer();
  checkpoint_dir_ = options_.run_dir + "/checkpoints";
  if (writer_) fs::create_directories(checkpoint_dir_);
  state_.val_loss = kNaN;
  state_.best_val_loss = std::numeric_limits<double>::infinity();
}

// How each step's batch is split (micro_batch_, accum_, eval_batches_): as train.grad_accum
// says, or with "auto" the fewest micro-batches that fit the memory there is, for the model
// the run starts with and for every model its growth events make. A resumed run keeps its
// checkpoint's micro-batch (options_.micro_batch) whatever memory it finds now, so that it
// goes on with the same numbers, unless that no longer divides the batch or fits at all.
void Trainer::split_choose() {
  micro_batch_ = train_.batch_size;
  accum_ = train_.grad_accum;
  eval_batches_ = train_.eval_batches;
  if (!train_.grad_accum_auto) return;
  refuse_auto_split_with_ranks(config_, dist_ != nullptr);
  const std::int64_t B = train_.batch_size, kept = options_.micro_batch;
  const MemoryAvailable there = train_memory_available(config_);
  MicroBatch split;
  std::string why;
  const MicroBatch kept_split{kept, kept > 0 ? B / kept : 0, kept > 0 ? train_memory_bytes(config_, plan_, kept) : 0};
  if (kept > 0 && B % kept == 0 && (there.bytes <= 0 || kept_split.need_bytes <= there.bytes)) {
    split = kept_split;
    why = "kept from its checkpoint";
  } else {
    split = micro_batch_choose(config_, plan_, there.bytes, there.where);
    std::string grown;  // the model a growth event makes, when the split is chosen for it
    if (!train_.growth.empty() || train_.growth_repeat.every_steps > 0) {
      for (const GrowthStage& stage : growth_stages(registry_, config_, 0, plan_.total_steps)) {
        RunConfig after = config_;
        after.model.spec = stage.to;
        const MicroBatch fits = micro_batch_choose(after, plan_, there.bytes, there.where);
        if (fits.size < split.size) {
          split = fits;
          grown =
              fmt::format(", for the model of its growth at step {} ({})", stage.event.at_step, stage.to->summary());
        }
      }
    }
    why = fmt::format("the memory check's estimate, {:.3g} GB a micro-batch{}; {}", split.need_bytes / 1e9, grown,
                      there.where);
    if (kept > 0) {
      why = fmt::format("its checkpoint's micro-batch of {} {}; {}", kept,
                        B % kept != 0 ? "does not divide train.batch_size" : "would not fit here", why);
    }
  }
  micro_batch_ = split.size;
  accum_ = split.accum;
  eval_batches_ = train_.eval_batches * split.accum;
  split_note_ = fmt::format("train.grad_accum = auto: {} sequences a step as {} micro-batch{} of {} ({})", B,
                            split.accum, split.accum == 1 ? "" : "es", split.size, why);
}

// Data (engine/train/task_data.h). Rank 0 prepares it first; the others then find it prepared (in
// a shared TFW_HOME) or prepare their own copy.
void Trainer::open_data() {
  if (dist_ != nullptr && !writer_) dist_->barrier("waiting for rank 0 to prepare the data");
  std::function<void(const std::string&)> progress;
  if (writer_) progress = [this](const std::string& message) { say(message); };
  data_ = task_data_open(config_, options_.home, micro_batch_, plan_.seq_len, train_.seed, progress);
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
  nlohmann::json counters = {{"step", state_.step},
                             {"tokens", state_.tokens},
                             {"examples", state_.examples},
                             {"flops", state_.flops},
                             {"wall_seconds", state_.wall_seconds},
                             {"sampler", data_->sampler_state()},
                             {"optimizer", optimizer_loaded},
                             {"init_from", started_from_checkpoint_}};
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
  if (writer_)
    std::ofstream(options_.run_dir + "/config.toml") << "# resolved run config\n" << state_.config_toml << "\n";
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
  state_.fused.emplace(*state_.optimizer);  // after restore(): the steps it loaded
}

// Before the first step: a run started from a grown checkpoint is evaluated, so that its
// validation curve starts where the growth happened (no gap on cumulative FLOPs; the
// evaluation reads fixed windows and draws no random numbers, so training is unchanged).
// Then what produced the numbers from here on: a resume on another machine,
// LibTorch or thread count adds its own event, and reports warn when a group's runs differ.
void Trainer::announce() {
  if (started_from_checkpoint_ && state_.step == 0) {
    state_.val_loss = evaluate(0);  // step 0: no tokens, no FLOPs, no time yet
    flush_metrics();
    event("evaluation", 0, evaluation_payload(state_.val_loss, 0, summary_.val_metrics));
  }
  if (dist_ != nullptr) {
    event("distributed", state_.step,
          nlohmann::json{{"world_size", world_},
                         {"backend", "gloo"},
                         {"per_rank_batch", local_B_},
                         {"global_batch", train_.batch_size},
                         {"source", dist_->env().source},
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
  if (train_.device.is_cuda())
    provenance["tf32"] = train_.tf32;
  else
    provenance["cpu_capability"] = cpu_capability();
  for (const auto& [key, value] : options_.provenance) provenance[key] = value;
  event("provenance", state_.step, provenance.dump());
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
  summary.recent_step_seconds = times_.recent_step_mean();
  summary.recent_data_seconds = times_.recent_wall_mean() - times_.recent_step_mean();
  summary.comm_seconds = comm_seconds_;
  summary.world_size = world_;
  summary.threads = runtime_active_threads();
  summary.tokens_per_second = times_.tokens_per_second(static_cast<double>(plan_.tokens_per_step), false);
  summary.mfu = times_.mfu(plan_.flops_per_step, summary.peak_flops, false);
  summary.memory_estimate_bytes = train_memory_bytes(config_, plan_, micro_batch_);
  summary.micro_batch = micro_batch_;
  summary.grad_accum = accum_;
  if (device_.is_cuda()) {
    summary.memory_peak_bytes = cuda_peak_allocated_bytes(device_.has_index() ? device_.index() : 0);
    summary.memory_peak_of = "allocator";
  } else {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    summary.memory_peak_bytes = static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux: kilobytes
    summary.memory_peak_of = "process";
  }
  if (summary.last_checkpoint.empty()) {
    std::vector<CheckpointInfo> checkpoints = checkpoint_list(checkpoint_dir_);
    if (!checkpoints.empty()) summary.last_checkpoint = checkpoints.back().path;
  }
  return summary;
}

}  // namespace tfw::train_impl
