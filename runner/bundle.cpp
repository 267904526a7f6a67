// Run bundles (bundle.h, docs/store.md "Run bundles"): what export and import share that is
// more than a line (the small pieces are in bundle_parts.h). The run's bundle object, which
// export writes and import compares, its hash (bundle_run_hash), and the checkpoint file names a
// bundle may carry. Writing a bundle is in bundle_export.cpp; checking and reading one into a
// store, in bundle_import.cpp.
#include "runner/bundle.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "runner/bundle_parts.h"
#include "storage/run_json.h"

namespace tfw::runner {

namespace bundle_parts {

// A checkpoint's file name as a bundle carries it: step-N.safetensors (or a legacy .pt), and
// its manifest step-N.toml. Nothing else travels, so nothing can name a path.
bool checkpoint_file_name_ok(const std::string& name) {
  if (name.size() < 8 || name.size() > 64 || name.rfind("step-", 0) != 0) return false;
  const std::size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 5) return false;
  for (std::size_t i = 5; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  const std::string ext = name.substr(dot);
  return ext == ".safetensors" || ext == ".pt" || ext == ".toml";
}

// The run as a bundle carries it: every field that is the run's own, none that belongs to the
// home it is in (ids, folders, capabilities).
json run_object(Store& store, const RunRecord& r) {
  json parent = nullptr;
  if (r.parent != 0) {
    std::optional<RunRecord> p = store.run_get(r.parent);
    if (!p)
      throw Error(fmt::format("run {} '{}' names parent run {}, which is not in the store", r.id, r.name, r.parent));
    parent = json{{"experiment", p->experiment}, {"name", p->name}};
  }
  json metrics = json::object();
  for (const MetricPoint& p : store.metrics(r.id)) {
    metrics[p.key].push_back(
        json::array({p.step, p.tokens, p.flops, p.wall, std::isfinite(p.value) ? json(p.value) : json(nullptr)}));
  }
  json events = json::array();
  for (const EventRow& e : store.events(r.id)) events.push_back(json::array({e.kind, e.step, e.wall, e.payload}));
  json checkpoints = json::array();
  for (const CheckpointRow& c : store.checkpoints(r.id)) {
    checkpoints.push_back(json::array({c.step, fs::path(c.path).filename().string(), c.checksum, c.bytes}));
  }
  // `tfw eval` results of the run's checkpoints ([experiment.eval]), by checkpoint file name,
  // in a fixed order so that the same runs give the same bytes.
  std::vector<EvaluationRow> rows = store.evaluations(r.id);
  std::sort(rows.begin(), rows.end(), [](const EvaluationRow& a, const EvaluationRow& b) {
    return std::tie(a.step, a.corpus, a.blocks, a.mode, a.metric, a.created, a.checkpoint) <
           std::tie(b.step, b.corpus, b.blocks, b.mode, b.metric, b.created, b.checkpoint);
  });
  json evaluations = json::array();
  for (const EvaluationRow& e : rows) {
    evaluations.push_back(json::array({fs::path(e.checkpoint).filename().string(), e.step, e.corpus, e.metric,
                                       std::isfinite(e.value) ? json(e.value) : json(nullptr), e.windows, e.tokens,
                                       e.mode, e.created, e.blocks}));
  }
  json object = run_record_json(r);
  object["config"] = r.config;
  object["parent"] = parent;
  object["final_metrics"] = r.final_metrics.text();
  object["metrics"] = metrics;
  object["events"] = events;
  object["checkpoints"] = checkpoints;
  if (!evaluations.empty()) object["evaluations"] = evaluations;  // bundles of runs without any stay as they were
  return object;
}

}  // namespace bundle_parts

std::string bundle_run_hash(Store& store, const RunRecord& run) {
  return bundle_parts::object_hash(bundle_parts::run_object(store, run));
}

}  // namespace tfw::runner
