// A run's record as JSON: the fields every JSON form of it shares, named as the runs table's
// columns. A bundle (runner/bundle.cpp) adds the config, the parent by name and the final
// metrics as their stored text; `tfw runs list --json` and the service
// (workbench/common/records_json.cpp) add the id, the parent's id, the final metrics as an
// object and the run's folder. Torch-free.
#pragma once

#include <nlohmann/json.hpp>

#include "storage/store.h"

namespace tfw {

inline nlohmann::json run_record_json(const RunRecord& r) {
  return {{"experiment", r.experiment},
          {"name", r.name},
          {"family", r.family},
          {"status", status_name(r.status)},
          {"heartbeat", r.heartbeat},
          {"seed", r.seed},
          {"git_commit", r.git_commit},
          {"host", r.host},
          {"started", r.started},
          {"ended", r.ended},
          {"growth_method", r.growth_method},
          {"growth_options", r.growth_options},
          {"stage", r.stage},
          {"parameters", r.parameters},
          {"tokens", r.tokens},
          {"flops", r.flops},
          {"inherited_flops", r.inherited_flops},
          {"cumulative_flops", r.cumulative_flops},
          {"error", r.error}};
}

}  // namespace tfw
