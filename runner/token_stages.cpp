// See token_stages.h.
#include "runner/token_stages.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint_meta.h"
#include "runner/lineage.h"
#include "storage/store.h"

namespace tfw::runner {

namespace {

constexpr int kMaxAncestors = 64;
constexpr std::size_t kMaxStages = 256;  // a repeated growth every few steps draws no more lines

// A growth event's effect on one count: `to` sets it, add_* adds to it.
struct Step {
  std::int64_t at = 0;
  std::optional<std::int64_t> to;
  std::int64_t add = 0;
};

// The growth events of a run config that change `key` ("n_attn" or "n_ffn"), by step, that a
// checkpoint at step `last_step` holds: a checkpoint at step s is written before the growth at s.
std::vector<Step> growth_steps(const toml::table& config, const std::string& key, std::int64_t last_step) {
  const std::string add_key = key == "n_ffn" ? "add_ffn" : "add_attn";
  std::vector<Step> steps;
  if (const toml::array* events = config["train"]["growth"].as_array()) {
    for (const toml::node& node : *events) {
      const toml::table* event = node.as_table();
      if (event == nullptr) continue;
      Step step;
      step.at = (*event)["at_step"].value_or(std::int64_t{0});
      step.to = (*event)["to"][key].value<std::int64_t>();
      step.add = (*event)[add_key].value_or(std::int64_t{0});
      if (step.at < last_step && (step.to || step.add != 0)) steps.push_back(step);
    }
  }
  const toml::node_view<const toml::node> repeat = config["train"]["growth_repeat"];
  const std::int64_t every = repeat["every_steps"].value_or(std::int64_t{0});
  const std::int64_t add = repeat[add_key].value_or(std::int64_t{0});
  if (every > 0 && add != 0) {
    const std::int64_t start = std::max<std::int64_t>(repeat["start_step"].value_or(every), 1);
    std::int64_t stop = repeat["stop_step"].value_or(std::int64_t{0});
    if (stop <= 0) stop = last_step;
    for (std::int64_t at = start; at <= stop && at < last_step && steps.size() < kMaxStages; at += every) {
      steps.push_back({at, std::nullopt, add});
    }
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.at < b.at; });
  return steps;
}

}  // namespace

std::vector<AttentionStage> lineage_token_stages(Store& store, const std::string& checkpoint,
                                                 const std::string& projection) {
  const std::optional<std::int64_t> owner = checkpoint_owner(store, checkpoint);
  if (!owner) return {};
  // The runs of the lineage, oldest first.
  std::vector<RunRecord> runs;
  for (std::optional<RunRecord> run = store.run_get(*owner); run && runs.size() < kMaxAncestors;
       run = run->parent != 0 ? store.run_get(run->parent) : std::nullopt) {
    runs.insert(runs.begin(), *run);
  }
  const std::int64_t step = checkpoint_read_meta(checkpoint).step;
  const std::string key = projection == "ffn" ? "n_ffn" : "n_attn";
  std::vector<AttentionStage> stages;
  auto reach = [&](const std::string& name, std::int64_t tokens) {
    if (stages.empty() || tokens > stages.back().tokens) stages.push_back({name, tokens});
  };
  for (std::size_t i = 0; i < runs.size() && stages.size() < kMaxStages; ++i) {
    toml::table config;
    try {
      config = toml::parse(runs[i].config);
    } catch (const toml::parse_error&) {
      return {};
    }
    std::optional<std::int64_t> tokens = config["model"][key].value<std::int64_t>();
    if (!tokens) return {};
    reach(runs[i].name, *tokens);
    // An ancestor up to the checkpoint its child grew from (its last); the checkpoint's own run
    // up to the checkpoint's step.
    std::int64_t last = step;
    if (i + 1 < runs.size()) {
      last = 0;
      for (const CheckpointRow& c : store.checkpoints(runs[i].id)) last = std::max(last, c.step);
    }
    for (const Step& s : growth_steps(config, key, last)) {
      tokens = (s.to ? *s.to : *tokens) + s.add;  // as a growth event's target: `to`, then add_*
      reach(fmt::format("{}@{}", runs[i].name, s.at), *tokens);
    }
  }
  return stages;
}

std::vector<AttentionStage> attention_stages(const std::string& home, const std::string& checkpoint,
                                             const std::string& projection, std::int64_t parameter_tokens) {
  try {
    const std::string path = home + "/runs.db";
    if (!std::filesystem::exists(path)) return {};
    auto store = Store::open_readonly(path);
    std::vector<AttentionStage> stages = lineage_token_stages(*store, checkpoint, projection);
    if (stages.empty() || stages.back().tokens != parameter_tokens) return {};
    return stages;
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace tfw::runner
