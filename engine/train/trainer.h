// The trainer: `tfw train` end to end. Builds the model from a RunConfig (or resumes it
// from a run's last valid checkpoint), samples random windows of the token shards with a
// seeded generator, trains with AdamW, warm-up + cosine, clipping and gradient
// accumulation, evaluates, accounts compute per step (docs/design/TOKENFORMER.md §5), checkpoints
// atomically, and stops cleanly when asked (SIGINT/SIGTERM set the stop flag).
// Torch-free header: the CLI includes it without compiling torch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/dist/distributed.h"
#include "engine/config/run_config.h"
#include "engine/plugin/task.h"
#include "engine/train/observer.h"

namespace tfw {

struct TrainOptions {
  std::string home;       // TFW_HOME (data and the machine's peak-FLOPs cache)
  std::string run_dir;    // metrics.jsonl, config.toml, checkpoints/ (the engine's alone: nobody else deletes there)
  bool resume = false;    // continue from the last valid checkpoint in run_dir
  std::string init_from;  // start a new run from this checkpoint's weights (a grown model); its
                          // lineage (inherited FLOPs, parent, growth method) carries over
  const std::atomic<bool>* stop = nullptr;  // set to stop after the current step
  RunObserver* observer = nullptr;          // not owned; null: nobody watches
  // Data-parallel training (engine/dist/distributed.h): this rank's process group, or null for a
  // single process. train.batch_size is the global batch: each rank trains on its share of
  // the windows one process would draw. Only rank 0 writes (run_dir, metrics, checkpoints,
  // the observer's metrics); the others need no run_dir. On resume or --init-from, rank 0 reads the
  // checkpoint and sends weights, optimiser state and counters to the others.
  std::shared_ptr<DistGroup> dist;
  // The caller's part of the "provenance" event the trainer records as it starts (the commit
  // and host of the binary that recorded it); the engine adds LibTorch, device, processor,
  // threads and precision.
  std::map<std::string, std::string> provenance;
  // `tfw train --profile N`: records N steps after engine/train/profile.h's warm-up (0: none).
  std::int64_t profile_steps = 0;
  // train.grad_accum = "auto": the micro-batch a resumed run keeps (its checkpoint's); 0: the
  // trainer chooses one (engine/machine/memory_check.h, micro_batch_choose).
  std::int64_t micro_batch = 0;
};

struct TrainSummary {
  std::int64_t steps = 0, tokens = 0, examples = 0, parameters = 0;
  double flops = 0, train_loss = 0, val_loss = 0, best_val_loss = 0, seconds = 0;
  std::vector<Metric> val_metrics;  // the last evaluation's, the loss first (engine/plugin/task.h)
  double tokens_per_second = 0, mfu = 0, peak_flops = 0;
  // This process's time by kind, in total (TrainProgress); seconds is the run's wall time
  // across every process that trained it.
  double step_seconds = 0, data_seconds = 0, eval_seconds = 0, checkpoint_seconds = 0, growth_seconds = 0;
  double process_seconds = 0;  // this process's training loop, wall time
  // The last StepTimes::kWindow (20) steps' means: the steady pace, without the first steps'
  // allocation and warm-up (bench/gpu_vs_pytorch.sh reads it).
  double recent_step_seconds = 0, recent_data_seconds = 0;
  double comm_seconds = 0;  // of step_seconds, averaging gradients over the ranks
  int world_size = 1;
  int threads = 0, thread_changes = 0;  // threads at the end; times the ThreadGovernor changed them
  double inherited_flops = 0;           // the lineage's FLOPs before this run
  std::int64_t growth_events = 0;       // applied by this process
  std::string last_checkpoint;
  bool interrupted = false;
  // Memory: what the memory check reckoned the run needs (train_memory_bytes), and the most it
  // held: on CUDA the caching allocator's peak for tensors (memory_peak_of "allocator"), on
  // the CPU the process's peak resident set, LibTorch's own code and data included ("process").
  double memory_estimate_bytes = 0;
  // How each step's batch was split: grad_accum micro-batches of micro_batch sequences (as
  // configured, or as train.grad_accum = "auto" chose).
  std::int64_t micro_batch = 0, grad_accum = 0;
  std::int64_t memory_peak_bytes = 0;
  std::string memory_peak_of;
};

TrainSummary train_run(const Registry& registry, const RunConfig& config, const TrainOptions& options);

// The run config stored in a run's newest valid checkpoint (for --resume), with train.*
// overrides. An override that changes the learning-rate schedule (a new budget) needs
// `extend`: "keep" (the schedule stays as it was) or "stretch" (recomputed over the new
// budget); without it, a UsageError says what the lr would do.
RunConfig train_resume_config(const Registry& registry, const std::string& run_dir,
                              const std::vector<std::string>& overrides, const std::string& extend = "");

// What a resumed run keeps of the machine it trained on, from its checkpoint's metadata: its
// thread count (set here, unless --threads chose; capped at the cores this process may run on; not with
// several ranks) and ATen's CPU kernels (asked for before the process's first kernel by
// cpu_capability_keep, engine/machine/runtime.h; `cpu` is false for a CUDA run). Returns the lines to
// say: what it kept, or why it could not, since other threads or kernels round differently.
std::vector<std::string> resume_machine_notes(const CheckpointMeta& recorded, bool cpu, bool distributed);

}  // namespace tfw
