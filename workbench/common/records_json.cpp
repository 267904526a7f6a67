// See records_json.h.
#include "workbench/common/records_json.h"

namespace tfw {

nlohmann::json json_or_empty(const std::string& text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  return value.is_discarded() ? nlohmann::json::object() : value;
}

nlohmann::json run_json(const RunRecord& r) {
  return {{"id", r.id}, {"experiment", r.experiment}, {"name", r.name}, {"family", r.family},
          {"status", status_name(r.status)}, {"heartbeat", r.heartbeat}, {"seed", r.seed}, {"git_commit", r.git_commit},
          {"host", r.host}, {"started", r.started}, {"ended", r.ended},
          {"parent", r.parent == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.parent)},
          {"growth_method", r.growth_method}, {"growth_options", r.growth_options}, {"stage", r.stage},
          {"parameters", r.parameters}, {"tokens", r.tokens}, {"flops", r.flops}, {"inherited_flops", r.inherited_flops},
          {"cumulative_flops", r.cumulative_flops}, {"final_metrics", json_or_empty(r.final_metrics)},
          {"error", r.error}, {"run_dir", r.run_dir}};
}

nlohmann::json job_json(const JobRow& j) {
  return {{"id", j.id}, {"kind", j.kind}, {"name", j.name}, {"status", status_name(j.status)}, {"submitted", j.submitted},
          {"started", j.started}, {"ended", j.ended},
          {"exit_code", j.exit_code < 0 ? nlohmann::json(nullptr) : nlohmann::json(j.exit_code)}, {"error", j.error}};
}

}  // namespace tfw
