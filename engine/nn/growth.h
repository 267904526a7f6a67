// Helpers the growth plugins and the trainer share: reading a spec's resolved values and
// extending AdamW state when parameters gained rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/nn/model.h"
#include "engine/plugin/plugin_api.h"

namespace tfw {

// Parameters that gained rows (dim 0) since the optimiser state was made get zero moments
// for the new rows; old rows' moments and the step counts stay bit-identical. Parameters
// whose other dims changed are an Error (grow in place only appends rows).
void optimizer_extend_rows(torch::optim::Optimizer& optimizer);

// The integer key `key` of a spec's resolved [model] table (throws if absent).
std::int64_t spec_int(const ModelSpec& spec, const std::string& key);
std::string spec_string(const ModelSpec& spec, const std::string& dotted_key, const std::string& fallback);
double spec_double(const ModelSpec& spec, const std::string& dotted_key, double fallback);
bool spec_bool(const ModelSpec& spec, const std::string& dotted_key, bool fallback);

// The named parameters of a model as a map (name -> tensor), for copying weights by name.
std::map<std::string, torch::Tensor> parameters_by_name(Model& model);

// The grown model's spec as `method` leaves it for a growth at the run's step `step`
// (GrowthMethod::grown_model, parsed by `family`; msg adds its mask ramp): what apply()
// receives and what the run's config and checkpoints keep.
std::shared_ptr<const ModelSpec> growth_grown_spec(const ModelFamily& family, const GrowthMethod& method,
                                                   const ModelSpec& from, const ModelSpec& to,
                                                   const toml::table& options, std::int64_t step);

// Throws UsageError unless `from` and `to` agree on each of `keys` (integers).
void growth_require_same(const std::string& method, const ModelSpec& from, const ModelSpec& to,
                         const std::vector<std::string>& keys);

}  // namespace tfw
