// The training loop. See trainer.h. Shapes: B batch, T sequence length, V vocabulary.
#include "engine/trainer.h"

#include <thread>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "engine/checkpoint.h"
#include "engine/device.h"
#include "engine/dist_group.h"
#include "engine/error.h"
#include "engine/growth.h"
#include "engine/home.h"
#include "engine/load.h"
#include "engine/mask.h"
#include "engine/model.h"
#include "engine/peak.h"
#include "engine/registry.h"
#include "engine/runtime.h"
#include "engine/train/eval.h"
#include "engine/train/metric_log.h"
#include "engine/train/optim.h"
#include "engine/train/task.h"
#include "engine/train/schedule.h"
#include "engine/train/step_times.h"

namespace tfw {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string config_text(const toml::table& resolved) {
  std::ostringstream out;
  out << resolved;
  return out.str();
}

// An "evaluation" event's payload: the loss, the tokens, and the headline metrics (accuracy).
std::string evaluation_payload(double val_loss, std::int64_t tokens, const std::vector<Metric>& metrics) {
  std::string out = fmt::format(R"({{"val_loss":{:.9g},"tokens":{})", val_loss, tokens);
  for (const Metric& m : metrics) {
    if (m.headline) out += fmt::format(R"(,{}:{:.9g})", nlohmann::json(m.key).dump(), m.value);
  }
  return out + "}";
}

// One growth event of the schedule, resolved against the model it will grow.
struct Stage {
  GrowthEvent event;
  const GrowthMethod* method = nullptr;
  std::shared_ptr<const ModelSpec> from, to;
  toml::table to_model;  // the resolved [model] table after the event
  GrowthPlan plan;
};

// Every growth event of the run: [[train.growth]] and the expansion of
// [train.growth_repeat], by step.
std::vector<GrowthEvent> growth_events(const RunConfig& config, std::int64_t total_steps) {
  std::vector<GrowthEvent> events = config.train.growth;
  const GrowthRepeat& repeat = config.train.growth_repeat;
  if (repeat.every_steps > 0) {
    const std::int64_t stop = repeat.stop_step > 0 ? repeat.stop_step : total_steps - 1;
    for (std::int64_t step = std::max<std::int64_t>(repeat.start_step, 1); step <= stop; step += repeat.every_steps) {
      for (const GrowthEvent& e : config.train.growth) {
        if (e.at_step == step) {
          throw UsageError(fmt::format("train.growth and train.growth_repeat both grow at step {}", step));
        }
      }
      events.push_back({step, repeat.method, toml::table{}, repeat.add_attn, repeat.add_ffn, repeat.options});
    }
  }
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.at_step < b.at_step; });
  return events;
}

bool restarts_schedule(const toml::table& options) {
  return options["lr_schedule"].value_or(std::string("continue")) == "restart";
}

// Resolves every event from `first_step` on against the model the previous events produce,
// so that a bad target or an impossible growth is an error before the first step, not in the
// middle of a run.
std::vector<Stage> growth_schedule(const Registry& registry, const RunConfig& config, std::int64_t first_step,
                                   std::int64_t total_steps) {
  const ModelFamily& family = registry.family(config.model.family);
  std::shared_ptr<const ModelSpec> current = config.model.spec;
  std::vector<Stage> stages;
  for (const GrowthEvent& event : config.train.growth) {
    // An event the run never reaches was silently ignored (issue 33).
    if (event.at_step >= total_steps) {
      throw UsageError(with_hint(fmt::format("train.growth at_step = {} is not before the run's last step: the run "
                                             "trains {} steps (0 to {}), so it would never grow",
                                             event.at_step, total_steps, total_steps - 1),
                                 "lower at_step, or raise the budget (train.max_steps, train.max_tokens)"));
    }
  }
  for (const GrowthEvent& event : growth_events(config, total_steps)) {
    if (event.at_step < first_step || event.at_step >= total_steps) continue;
    Stage stage;
    stage.event = event;
    stage.method = &registry.growth_method(event.method);
    stage.from = current;
    toml::table target = current->to_toml();
    for (const auto& [key, value] : event.to) target.insert_or_assign(key, value);
    for (const auto& [key, add] : {std::pair<const char*, std::int64_t>{"n_attn", event.add_attn}, {"n_ffn", event.add_ffn}}) {
      if (add == 0) continue;
      auto base = target[key].value<std::int64_t>();
      if (!base) throw UsageError(fmt::format("train.growth at step {}: add_{} needs a model with {}", event.at_step,
                                              key[2] == 'a' ? "attn" : "ffn", key));
      target.insert_or_assign(key, *base + add);
    }
    ConfigTable view(target, fmt::format("train.growth(step {}).to", event.at_step));
    stage.to = family.parse(view);
    view.finish();
    stage.plan = stage.method->plan(*stage.from, *stage.to, event.options);
    stage.to = growth_grown_spec(family, *stage.method, *stage.from, *stage.to, event.options, event.at_step);
    stage.to_model = stage.to->to_toml();
    current = stage.to;
    stages.push_back(std::move(stage));
  }
  return stages;
}

// The learning rate with the schedule restarted at `restart_step` (0: never restarted).
double lr_for(const TrainConfig& train, const TrainPlan& plan, std::int64_t step, std::int64_t restart_step) {
  if (restart_step == 0) return lr_at(train, plan, step);
  TrainPlan stage = plan;
  stage.total_steps = plan.total_steps - restart_step;
  stage.schedule_steps = plan.schedule_steps - restart_step;
  return lr_at(train, stage, step - restart_step);
}

// The step of the last schedule restart at or before `step` (0: none).
std::int64_t restart_step_at(const RunConfig& config, std::int64_t step, std::int64_t total_steps) {
  std::int64_t restart = 0;
  for (const GrowthEvent& e : growth_events(config, total_steps)) {
    if (e.at_step <= step && restarts_schedule(e.options)) restart = e.at_step;
  }
  return restart;
}

}  // namespace

RunConfig train_resume_config(const Registry& registry, const std::string& run_dir,
                              const std::vector<std::string>& overrides, const std::string& extend) {
  for (const std::string& item : overrides) {
    if (item.rfind("train.", 0) != 0) {
      throw UsageError(with_hint(fmt::format("--set {}: only train.* keys can change on resume", item),
                                 "the model and data of a run are fixed; start a new run to change them"));
    }
  }
  if (checkpoint_list(run_dir + "/checkpoints").empty()) {
    throw UsageError(with_hint(fmt::format("run '{}' has no complete checkpoint to resume from", run_dir),
                               "start it again with `tfw train CONFIG --name NAME` (a run that never checkpointed "
                               "is replaced), or `tfw run` the experiment again"));
  }
  if (!extend.empty() && extend != "keep" && extend != "stretch") {
    throw UsageError(with_hint(fmt::format("--extend {}: expected keep or stretch", extend),
                               "keep: the schedule stays as it was; stretch: it is recomputed over the new budget"));
  }
  CheckpointMeta meta;
  const CheckpointInfo latest = checkpoint_latest_valid(run_dir + "/checkpoints", nullptr, &meta);
  toml::table table = toml::parse(meta.config_toml, latest.path);
  const RunConfig stored = run_config_parse(registry, table, run_dir + "/config.toml");
  config_apply_overrides(table, overrides);
  RunConfig config = run_config_parse(registry, table, run_dir + "/config.toml");
  // A changed budget would silently re-stretch the learning-rate schedule (the lr jumps at
  // the resume step): that takes an explicit choice.
  const TrainPlan before = train_plan(stored), after = train_plan(config);
  if (after.schedule_steps != before.schedule_steps || after.warmup_steps != before.warmup_steps) {
    const double lr_then = lr_at(stored.train, before, meta.step - 1), lr_now = lr_at(config.train, after, meta.step);
    if (extend.empty()) {
      throw UsageError(with_hint(
          fmt::format("the new budget changes the run's learning-rate schedule from {} to {} steps: the lr would go "
                      "from {:.3g} at step {} to {:.3g} at step {}",
                      before.schedule_steps, after.schedule_steps, lr_then, meta.step, lr_now, meta.step + 1),
          "choose: --extend keep (the schedule stays; past its end the lr stays at its minimum) or --extend stretch "
          "(the cosine is recomputed over the new budget)"));
    }
    if (extend == "keep") {
      if (table.get("train") == nullptr) table.insert("train", toml::table{});
      toml::table* train = table["train"].as_table();
      train->insert_or_assign("schedule_steps", before.schedule_steps);
      train->insert_or_assign("warmup_steps", before.warmup_steps);
      config = run_config_parse(registry, table, run_dir + "/config.toml");
    }
  }
  return config;
}

TrainSummary train_run(const Registry& registry, const RunConfig& initial, const TrainOptions& options) {
  RunConfig config = initial;  // its [model] follows the growth events
  const TrainConfig& train = config.train;
  TrainPlan plan = train_plan(config);
  train_memory_check(config, plan);
  const std::int64_t T = plan.seq_len, B = train.batch_size;
  const torch::Device device = device_resolve(train.device);  // a UsageError before any work
  if (device.is_cuda()) cuda_set_tf32(train.tf32);             // fp32 means fp32 unless asked
  const Precision precision = precision_parse(train.precision);
  auto say = [&](const std::string& message) {
    if (options.on_message) options.on_message(message);
  };
  // Data parallelism: this rank trains on rows [first_row, first_row + local_B) of each
  // global batch; rank 0 alone writes.
  DistGroup* const dist = options.dist.get();
  const int rank = dist != nullptr ? dist->rank() : 0, world = dist != nullptr ? dist->world() : 1;
  const bool writer = rank == 0;
  if (B % world != 0) {
    throw UsageError(with_hint(fmt::format("train.batch_size = {} does not split evenly over {} ranks", B, world),
                               fmt::format("choose a batch size that is a multiple of {}, or another number of ranks",
                                           world)));
  }
  const std::int64_t local_B = B / world, first_row = rank * local_B;

  // Data (engine/train/task.h). Rank 0 prepares it first; the others then find it prepared
  // (in a shared TFW_HOME) or prepare their own copy.
  if (dist != nullptr && !writer) dist->barrier("waiting for rank 0 to prepare the data");
  std::unique_ptr<TaskData> data =
      task_data_open(config, options.home, B, T, train.seed, writer ? std::function<void(const std::string&)>(say) : nullptr);
  if (dist != nullptr && writer) dist->barrier("waiting for rank 0 to prepare the data");

  // Model, optimiser, sampler; then the checkpoint when resuming or starting from one.
  const ModelFamily& family = registry.family(config.model.family);
  std::shared_ptr<Model> model = family.build(*config.model.spec, train.seed);
  model->to(device);
  auto make_optimizer = [&] {
    return std::make_unique<torch::optim::AdamW>(optimizer_groups(*model, train), torch::optim::AdamWOptions(train.lr));
  };
  std::unique_ptr<torch::optim::AdamW> optimizer = make_optimizer();
  const std::string checkpoint_dir = options.run_dir + "/checkpoints";
  if (writer) fs::create_directories(checkpoint_dir);
  CheckpointMeta state;
  state.val_loss = kNaN;
  state.best_val_loss = std::numeric_limits<double>::infinity();
  bool optimizer_loaded = false;
  if (!writer) {
    // Everything comes from rank 0 below.
  } else if (options.resume) {
    // The newest checkpoint that verifies. Newer damaged ones are said out loud, recorded as an
    // event and moved aside (*.damaged, kept for inspection), so the run rewrites those steps.
    std::vector<std::string> skipped;
    const CheckpointInfo latest = checkpoint_latest_valid(checkpoint_dir, &skipped);
    for (const CheckpointInfo& newer : checkpoint_list(checkpoint_dir)) {
      if (newer.step <= latest.step) continue;
      const std::string manifest = fs::path(newer.path).replace_extension(".toml").string();
      std::error_code ec;
      fs::rename(manifest, manifest + ".damaged", ec);
      fs::rename(newer.path, newer.path + ".damaged", ec);
    }
    for (const std::string& why : skipped) {
      say(fmt::format("warning: skipped a damaged checkpoint (moved aside as *.damaged): {}", why));
      if (options.on_event) {
        options.on_event("checkpoint_damaged", latest.step, nlohmann::json({{"reason", why}}).dump());
      }
    }
    state = checkpoint_load(latest.path, *model, optimizer.get());
    if (state.examples < 0) state.examples = state.tokens / data->tokens_per_example();  // an older checkpoint
    optimizer_loaded = true;
    data->sampler_restore(state.sampler_state);
    say(fmt::format("resumed {} at step {} ({} tokens)", latest.path, state.step, state.tokens));
    // The thread count the run trained with, unless --threads says otherwise: another count
    // splits the reductions differently, and the losses would not continue exactly.
    if (state.threads > 0 && state.threads != runtime_threads() && !runtime_threads_explicit() && dist == nullptr) {
      const int cores = static_cast<int>(std::thread::hardware_concurrency());
      runtime_init(static_cast<int>(state.threads));
      say(fmt::format("threads: {}, as the run recorded{}", state.threads,
                      cores > 0 && cores < state.threads
                          ? fmt::format(" (this machine has {} cores: slower, but the same arithmetic)", cores)
                          : ""));
    }
  } else if (!options.init_from.empty()) {
    CheckpointMeta origin = checkpoint_load(options.init_from, *model, nullptr);
    state.inherited_flops = origin.inherited_flops + origin.flops;
    state.parent_run = origin.parent_run;
    state.parent_checkpoint = origin.parent_checkpoint.empty() ? options.init_from : origin.parent_checkpoint;
    state.growth_method = origin.growth_method;
    state.growth_options = origin.growth_options;
    say(fmt::format("initialised from {} (inherits {:.3e} FLOPs)", options.init_from, state.inherited_flops));
  }
  bool started_from_checkpoint = !options.init_from.empty();
  if (dist != nullptr) {
    // Rank 0's weights, optimiser state, counters and data cursor, on every rank: the ranks
    // need not see the checkpoint's file system, and they start identical.
    dist->share_module(*model);
    nlohmann::json counters = {{"step", state.step}, {"tokens", state.tokens}, {"examples", state.examples}, {"flops", state.flops},
                               {"wall_seconds", state.wall_seconds}, {"sampler", data->sampler_state()},
                               {"optimizer", optimizer_loaded}, {"init_from", started_from_checkpoint}};
    counters = nlohmann::json::parse(dist->broadcast_string(counters.dump(), "sending rank 0's counters"));
    if (!writer) {
      state.step = counters["step"];
      state.tokens = counters["tokens"];
      state.examples = counters["examples"];
      state.flops = counters["flops"];
      state.wall_seconds = counters["wall_seconds"];
      data->sampler_restore(counters["sampler"]);
      started_from_checkpoint = counters["init_from"];
    }
    if (counters["optimizer"].get<bool>()) dist->share_optimizer(*optimizer, device);
  }
  // A parameter mask (train.mask.use): the masked tokens take no part and stay as they are.
  if (!train.mask.use.empty()) say(mask_apply(*model, train.mask, train.mask.use));
  MaskedTokenHold held(*model);
  std::vector<Stage> stages = growth_schedule(registry, config, state.step, plan.total_steps);
  std::size_t next_stage = 0;
  std::int64_t restart_step = restart_step_at(config, state.step - 1, plan.total_steps);
  state.config_toml = config_text(config.resolved);
  if (writer) std::ofstream(options.run_dir + "/config.toml") << "# resolved run config\n" << config.resolved << "\n";
  MetricLog metrics(writer ? options.run_dir + "/metrics.jsonl" : "", options);

  TrainSummary summary;
  summary.inherited_flops = state.inherited_flops;
  // MFU is over the world's peak: each rank's threads have the peak rank 0 measured (or took
  // from TFW_HOME/machine.toml) for its own thread count.
  summary.peak_flops = writer ? peak_flops_resolve(options.home, train.peak_flops, train.device, train.precision) : 0;
  if (dist != nullptr) {
    std::vector<torch::Tensor> peak{torch::tensor({summary.peak_flops}, torch::kFloat64)};
    dist->broadcast(peak, "sending rank 0's peak FLOP/s");
    summary.peak_flops = peak[0].item<double>() * static_cast<double>(world);
  }
  std::vector<torch::Tensor> parameters = model->parameters();

  auto save = [&] {
    if (!writer) return;
    const auto started = Clock::now();
    // The store commits the metrics up to here before the checkpoint exists: a crash after
    // it becomes valid cannot lose them (resume rewrites only the steps after it).
    if (options.before_checkpoint) options.before_checkpoint();
    state.sampler_state = data->sampler_state();
    state.config_toml = config_text(config.resolved);
    state.threads = runtime_active_threads();
    CheckpointInfo saved = checkpoint_save(checkpoint_dir, *model, optimizer.get(), state);
    summary.last_checkpoint = saved.path;
    if (options.on_checkpoint) options.on_checkpoint(saved.path, saved.step, saved.crc32, saved.size);
    for (const std::string& removed : checkpoint_prune(checkpoint_dir, train.keep_checkpoints)) {
      if (options.on_checkpoint_removed) options.on_checkpoint_removed(removed);
    }
    summary.checkpoint_seconds += seconds_since(started);
  };

  // A growth event: evaluate, grow, carry the optimiser on as the options say, evaluate.
  auto grow = [&](const Stage& stage) {
    const auto started = Clock::now();
    const double before = data->validation_loss(*model, train.eval_batches, precision, dist);
    model = stage.method->apply(*model, family, *stage.from, *stage.to, stage.event.options,
                                train.seed + static_cast<std::uint64_t>(stage.event.at_step));
    model->to(device);  // a no-op for growth that keeps the model's tensors
    model->set_training_step(state.step);
    mask_apply(*model, train.mask, train.mask.use);  // grown tokens outside the used ranges are masked
    held.refresh(*model);
    const bool extend = stage.method->in_place() &&
                        stage.event.options["optimizer"].value_or(std::string("extend")) == "extend";
    if (extend) {
      optimizer_extend_rows(*optimizer);
    } else {
      optimizer = make_optimizer();
    }
    parameters = model->parameters();
    config.model.spec = stage.to;
    config.resolved.insert_or_assign("model", stage.to_model);
    plan.flops_per_step = static_cast<double>(stage.to->flops_per_token(T).training_per_example()) *
                          static_cast<double>(plan.examples_per_step);
    if (restarts_schedule(stage.event.options)) restart_step = stage.event.at_step;
    const double after = data->validation_loss(*model, train.eval_batches, precision, dist);
    std::ostringstream options_text;
    options_text << stage.event.options;
    if (options.on_event) {
      options.on_event("growth", state.step,
                       fmt::format(R"({{"method":"{}","from":"{}","to":"{}","parameters":{},"loss_before":{:.9g},)"
                                   R"("loss_after":{:.9g},"optimizer":"{}","exact":{}}})",
                                   stage.method->name(), stage.from->summary(), stage.to->summary(),
                                   stage.to->parameter_count(), before, after, extend ? "extend" : "reset",
                                   stage.plan.exact ? "true" : "false"));
    }
    const double wall = state.wall_seconds;
    metrics.write(state.step, state.tokens, state.flops, wall, "growth/loss_before", before);
    metrics.write(state.step, state.tokens, state.flops, wall, "growth/loss_after", after);
    metrics.write(state.step, state.tokens, state.flops, wall, "growth/parameters",
                  static_cast<double>(stage.to->parameter_count()));
    summary.growth_events += 1;
    say(fmt::format("step {}: {} grew {} -> {} ({} parameters); val loss {:.4f} -> {:.4f}", state.step,
                    stage.method->name(), stage.from->summary(), stage.to->summary(), stage.to->parameter_count(),
                    before, after));
    summary.growth_seconds += seconds_since(started);
  };

  // One evaluation: every validation metric of the task (the loss first, returned), recorded
  // as val/KEY.
  auto validate = [&](std::int64_t step, std::int64_t tokens, double flops, double wall) {
    const auto started = Clock::now();
    const std::vector<Metric> results = data->validate(*model, train.eval_batches, precision, dist);
    for (const Metric& metric : results) metrics.write(step, tokens, flops, wall, "val/" + metric.key, metric.value);
    summary.val_metrics = results;
    summary.eval_seconds += seconds_since(started);
    return results.front().value;
  };

  // This process's time starts here, so that its breakdown (steps, data, evaluation,
  // checkpoints, growth) adds up to it: the first evaluation below is part of it.
  const double wall_before = state.wall_seconds;
  const auto process_start = Clock::now();
  // A run started from a grown checkpoint is evaluated before its first step, so that its
  // validation curve starts where the growth happened (no gap on cumulative FLOPs). The
  // evaluation reads fixed windows and draws no random numbers: training is unchanged.
  if (started_from_checkpoint && state.step == 0) {
    state.val_loss = validate(0, 0, 0, 0);
    metrics.flush();
    if (options.on_event) {
      options.on_event("evaluation", 0, evaluation_payload(state.val_loss, 0, summary.val_metrics));
    }
  }

  if (dist != nullptr && options.on_event) {
    options.on_event("distributed", state.step,
                     nlohmann::json{{"world_size", world}, {"backend", "gloo"}, {"per_rank_batch", local_B},
                                    {"global_batch", B}, {"source", dist->env().source},
                                    {"master", fmt::format("{}:{}", dist->env().master_addr, dist->env().master_port)}}
                         .dump());
  }
  // What produced the numbers from here on (issue 34): a resume on another machine, LibTorch
  // or thread count adds its own event, and reports warn when a group's runs differ.
  if (options.on_event) {
    nlohmann::json provenance = {{"libtorch", torch_version()},
                                 {"cuda", torch_cuda_version()},
                                 {"device", train.device},
                                 {"processor", compute_device_name(train.device)},
                                 {"threads", runtime_threads()},
                                 {"precision", train.precision},
                                 {"world_size", world}};
    if (train.device != "cpu") provenance["tf32"] = train.tf32;
    for (const auto& [key, value] : options.provenance) provenance[key] = value;
    options.on_event("provenance", state.step, provenance.dump());
  }
  // Gradients are averaged in buckets of at most this many bytes (as DDP's default).
  constexpr std::int64_t kBucketBytes = 25 << 20;
  StepTimes times;  // this process's steps: the one source of tokens/s, MFU and the ETA
  double comm_seconds_total = 0;
  bool peers_stop = false;  // a rank was asked to stop (agreed at the last step's all-reduce)
  ThreadGovernor governor;
  while (state.step < plan.total_steps) {
    const bool stop_here = options.stop != nullptr && options.stop->load();
    // Ranks stop together, at the step after one of them was asked to.
    if (dist == nullptr ? stop_here : peers_stop) {
      summary.interrupted = true;
      break;
    }
    model->set_training_step(state.step);
    while (next_stage < stages.size() && stages[next_stage].event.at_step == state.step) grow(stages[next_stage++]);
    const auto step_start = Clock::now();
    const double lr = lr_for(train, plan, state.step, restart_step);
    for (auto& group : optimizer->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    optimizer->zero_grad();
    double loss = 0;
    double data_seconds = 0;
    for (std::int64_t micro = 0; micro < train.grad_accum; ++micro) {
      const auto draw_start = Clock::now();
      const Batch batch = data->next(B, first_row, local_B);
      data_seconds += seconds_since(draw_start);
      torch::Tensor micro_loss = data->loss(*model, batch, precision) / static_cast<double>(train.grad_accum);
      micro_loss.backward();
      loss += micro_loss.item<double>();
    }
    if (dist != nullptr) {
      // The mean gradient over the ranks is the gradient of the global batch's mean loss
      // (each rank's share has the same size); the loss and the stop requests go with it.
      const auto comm_start = Clock::now();
      dist->average_gradients(parameters, kBucketBytes);
      std::vector<torch::Tensor> shared{torch::tensor({loss, stop_here ? 1.0 : 0.0}, torch::kFloat64)};
      dist->allreduce_sum(shared, "the all-reduce of the loss");
      loss = shared[0][0].item<double>() / static_cast<double>(world);
      peers_stop = shared[0][1].item<double>() > 0;
      comm_seconds_total += seconds_since(comm_start);
    }
    const double wall = wall_before + seconds_since(process_start);
    if (!std::isfinite(loss)) {
      metrics.write(state.step, state.tokens, state.flops, wall, "event/nonfinite_loss", loss);
      metrics.flush();
      if (options.on_event) {
        options.on_event("nan", state.step, fmt::format(R"({{"loss":"{}","policy":"{}"}})", loss, train.nan_policy));
      }
      if (train.nan_policy == "stop") {
        throw Error(with_hint(fmt::format("loss is {} at step {}; stopped (train.nan_policy = \"stop\")", loss,
                                          state.step),
                              "lower train.lr, raise train.warmup_steps, or set train.nan_policy = \"skip\"; "
                              "resume from the last checkpoint with tfw train --resume"));
      }
      optimizer->zero_grad();  // skip: no update, the step still counts
    }
    double grad_norm = kNaN;
    if (std::isfinite(loss)) {
      grad_norm = gradients_clip(parameters, train.grad_clip);
      held.save();
      optimizer->step();
      held.restore();
    }
    state.step += 1;
    state.tokens += plan.tokens_per_step;
    state.examples += plan.examples_per_step;
    state.flops += plan.flops_per_step;
    state.train_loss = loss;
    times.add(seconds_since(step_start) - data_seconds, data_seconds);

    TrainProgress progress;
    progress.step = state.step;
    progress.total_steps = plan.total_steps;
    progress.tokens = state.tokens;
    progress.examples = state.examples;
    progress.flops = state.flops;
    progress.loss = loss;
    progress.lr = lr;
    progress.grad_norm = grad_norm;
    // What the user watches: the recent pace (StepTimes::kWindow steps).
    progress.tokens_per_second = times.tokens_per_second(static_cast<double>(plan.tokens_per_step), true);
    progress.mfu = times.mfu(plan.flops_per_step, summary.peak_flops, true);
    progress.eta_seconds = times.eta_seconds(plan.total_steps - state.step);
    progress.elapsed_seconds = wall_before + seconds_since(process_start);
    progress.step_seconds = times.recent_step_mean();
    progress.data_seconds = times.recent_wall_mean() - times.recent_step_mean();
    progress.threads = runtime_active_threads();
    progress.comm_seconds = comm_seconds_total / static_cast<double>(times.steps());
    progress.world_size = world;

    metrics.write(state.step, state.tokens, state.flops, wall, "train/loss", loss);
    metrics.write(state.step, state.tokens, state.flops, wall, "train/lr", lr);
    metrics.write(state.step, state.tokens, state.flops, wall, "train/grad_norm", grad_norm);
    if (state.step % train.eval_every == 0 || state.step == plan.total_steps) {
      model->set_training_step(state.step);  // the model after state.step steps
      state.val_loss = validate(state.step, state.tokens, state.flops, wall);
      state.best_val_loss = std::min(state.best_val_loss, state.val_loss);
      progress.evaluated = true;
      if (options.on_event) {
        options.on_event("evaluation", state.step, evaluation_payload(state.val_loss, state.tokens, summary.val_metrics));
      }
    }
    progress.val_loss = state.val_loss;
    if (progress.evaluated) progress.val_metrics = summary.val_metrics;
    metrics.flush();
    state.wall_seconds = wall_before + seconds_since(process_start);
    if (state.step % train.checkpoint_every == 0 || state.step == plan.total_steps) save();
    progress.eval_seconds = summary.eval_seconds;
    progress.checkpoint_seconds = summary.checkpoint_seconds;
    if (options.on_progress) options.on_progress(progress);
    if (std::optional<std::string> change = governor.update()) {
      summary.thread_changes += 1;
      say(fmt::format("step {}: {}", state.step, *change));
      if (options.on_event) {
        options.on_event("threads", state.step,
                         nlohmann::json{{"threads", runtime_active_threads()}, {"reason", *change}}.dump());
      }
    }
  }
  state.wall_seconds = wall_before + seconds_since(process_start);
  if (summary.interrupted) {
    save();
    say(fmt::format("stopped at step {}/{}; checkpoint {}", state.step, plan.total_steps, summary.last_checkpoint));
  }
  for (const torch::Tensor& p : model->parameters()) summary.parameters += p.numel();
  summary.steps = state.step;
  summary.tokens = state.tokens;
  summary.examples = state.examples;
  summary.flops = state.flops;
  summary.train_loss = state.train_loss;
  summary.val_loss = state.val_loss;
  summary.best_val_loss = state.best_val_loss;
  summary.seconds = state.wall_seconds;
  summary.process_seconds = seconds_since(process_start);
  summary.step_seconds = times.step_total();
  summary.data_seconds = times.data_total();
  summary.comm_seconds = comm_seconds_total;
  summary.world_size = world;
  summary.threads = runtime_active_threads();
  // The summary: over every step of this process.
  summary.tokens_per_second = times.tokens_per_second(static_cast<double>(plan.tokens_per_step), false);
  summary.mfu = times.mfu(plan.flops_per_step, summary.peak_flops, false);
  if (summary.last_checkpoint.empty()) {
    std::vector<CheckpointInfo> checkpoints = checkpoint_list(checkpoint_dir);
    if (!checkpoints.empty()) summary.last_checkpoint = checkpoints.back().path;
  }
  return summary;
}

}  // namespace tfw
