// Resuming a run: the config stored in its newest valid checkpoint, with train.* overrides
// and an explicit choice when a new budget would change the learning-rate schedule. See
// trainer.h.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/config_table.h"
#include "engine/core/error.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/machine/cores.h"
#include "engine/machine/runtime.h"
#include "engine/config/schedule.h"
#include "engine/train/trainer.h"

namespace tfw {

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
  // With train.grad_accum = "auto" train.batch_size is a step's batch, with a number a
  // micro-batch: switching one for the other would change the sequences a step unsaid.
  if (stored.train.grad_accum_auto != config.train.grad_accum_auto &&
      before.examples_per_step != after.examples_per_step) {
    throw UsageError(with_hint(
        fmt::format("--set train.grad_accum: the run's steps would go from {} to {} sequences (with \"auto\", "
                    "train.batch_size is a step's batch; with a number, a micro-batch)",
                    before.examples_per_step, after.examples_per_step),
        fmt::format("to keep {} a step, set train.batch_size too: {} / N with train.grad_accum = N, or {} with "
                    "\"auto\"",
                    before.examples_per_step, before.examples_per_step, before.examples_per_step)));
  }
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

std::vector<std::string> resume_machine_notes(const CheckpointMeta& recorded, bool cpu, bool distributed) {
  std::vector<std::string> notes;
  const std::string differ = "so its losses may differ from an uninterrupted run's in the last digits from here on";
  // Threads: another count splits reductions differently. A forged 1024 started 1,026 threads.
  if (recorded.threads > 0 && recorded.threads != runtime_threads() && !runtime_threads_explicit() && !distributed) {
    const int cores = cores_usable();  // its affinity's: a Slurm task's, not the node's
    const bool capped = recorded.threads > cores;
    runtime_init(capped ? cores : static_cast<int>(recorded.threads));
    notes.push_back(capped ? fmt::format("threads: {}, the cores this process may run on; the run recorded {}, {} "
                                         "(--threads N chooses)",
                                         cores, recorded.threads, differ)
                           : fmt::format("threads: {}, as the run recorded", recorded.threads));
  }
  // Kernels: AVX-512 and AVX2 kernels round differently. The runner asked ATen for
  // the recorded ones before anything ran (runner/recorded_run.cpp); here is what it got.
  if (!cpu || recorded.cpu_capability.empty()) return notes;
  const std::string now = cpu_capability();
  const std::vector<std::string> available = cpu_capabilities_available();
  if (now == recorded.cpu_capability) {
    if (now != available.front()) notes.push_back(fmt::format("kernels: ATen's {}, as the run recorded", now));
  } else {
    const bool lacks = std::find(available.begin(), available.end(), recorded.cpu_capability) == available.end();
    notes.push_back(fmt::format("kernels: ATen's {}, not the {} the run recorded ({}), {}{}", now,
                                recorded.cpu_capability,
                                cpu_capability_explicit() ? "chosen with --kernels or ATEN_CPU_CAPABILITY"
                                : lacks                   ? "this processor lacks them"
                                                          : "ATen had chosen before the run's were read",
                                differ, lacks || cpu_capability_explicit() ? "" : " (--kernels NAME chooses)"));
  }
  return notes;
}

}  // namespace tfw
