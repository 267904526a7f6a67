#include "engine/nn/growth.h"

#include <fmt/format.h>
#include <torch/optim/adam.h>  // AdamParamState: a checkpoint written by Adam

#include "engine/core/config_table.h"
#include "engine/core/error.h"

namespace tfw {

void optimizer_extend_rows(torch::optim::Optimizer& optimizer) {
  torch::NoGradGuard no_grad;
  auto extend = [](torch::Tensor& moment, const torch::Tensor& param) {
    if (!moment.defined() || moment.sizes() == param.sizes()) return;
    if (moment.dim() != param.dim() || moment.sizes().slice(1) != param.sizes().slice(1) ||
        moment.size(0) > param.size(0)) {
      throw Error(fmt::format("optimizer state {} cannot follow parameter {}: only appended rows can be extended",
                              c10::str(moment.sizes()), c10::str(param.sizes())));
    }
    std::vector<std::int64_t> shape = param.sizes().vec();
    shape[0] = param.size(0) - moment.size(0);
    moment = torch::cat({moment, torch::zeros(shape, moment.options())}, 0);
  };
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      auto found = optimizer.state().find(param.unsafeGetTensorImpl());
      if (found == optimizer.state().end()) continue;
      if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(found->second.get())) {
        torch::Tensor avg = adamw->exp_avg(), avg_sq = adamw->exp_avg_sq(), max_sq = adamw->max_exp_avg_sq();
        extend(avg, param);
        extend(avg_sq, param);
        extend(max_sq, param);
        adamw->exp_avg(avg);
        adamw->exp_avg_sq(avg_sq);
        adamw->max_exp_avg_sq(max_sq);
      } else if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(found->second.get())) {
        torch::Tensor avg = adam->exp_avg(), avg_sq = adam->exp_avg_sq(), max_sq = adam->max_exp_avg_sq();
        extend(avg, param);
        extend(avg_sq, param);
        extend(max_sq, param);
        adam->exp_avg(avg);
        adam->exp_avg_sq(avg_sq);
        adam->max_exp_avg_sq(max_sq);
      } else {
        throw Error("optimizer_extend_rows supports Adam and AdamW state only");
      }
    }
  }
}

namespace {
const toml::node* spec_node(const toml::table& table, const std::string& dotted_key) {
  const toml::node* node = &table;
  std::size_t start = 0;
  while (node != nullptr) {
    std::size_t dot = dotted_key.find('.', start);
    const toml::table* t = node->as_table();
    if (t == nullptr) return nullptr;
    node = t->get(dotted_key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
  return nullptr;
}
}  // namespace

std::int64_t spec_int(const ModelSpec& spec, const std::string& key) {
  toml::table table = spec.to_toml();
  const toml::node* node = spec_node(table, key);
  if (node == nullptr || !node->value<std::int64_t>()) {
    throw Error(fmt::format("{} model config has no integer '{}'", spec.family(), key));
  }
  return *node->value<std::int64_t>();
}

std::string spec_string(const ModelSpec& spec, const std::string& dotted_key, const std::string& fallback) {
  toml::table table = spec.to_toml();
  const toml::node* node = spec_node(table, dotted_key);
  return node ? node->value_or(fallback) : fallback;
}

double spec_double(const ModelSpec& spec, const std::string& dotted_key, double fallback) {
  toml::table table = spec.to_toml();
  const toml::node* node = spec_node(table, dotted_key);
  return node ? node->value_or(fallback) : fallback;
}

bool spec_bool(const ModelSpec& spec, const std::string& dotted_key, bool fallback) {
  toml::table table = spec.to_toml();
  const toml::node* node = spec_node(table, dotted_key);
  return node ? node->value_or(fallback) : fallback;
}

std::map<std::string, torch::Tensor> parameters_by_name(Model& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : model.named_parameters()) out.emplace(item.key(), item.value());
  return out;
}

void growth_require_same(const std::string& method, const ModelSpec& from, const ModelSpec& to,
                         const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (spec_int(from, key) != spec_int(to, key)) {
      throw UsageError(with_hint(fmt::format("{} keeps {}: the target changes it ({} -> {})", method, key,
                                             spec_int(from, key), spec_int(to, key)),
                                 fmt::format("make the target's {} equal to the source's", key)));
    }
  }
}

std::shared_ptr<const ModelSpec> growth_grown_spec(const ModelFamily& family, const GrowthMethod& method,
                                                   const ModelSpec& from, const ModelSpec& to,
                                                   const toml::table& options, std::int64_t step) {
  const toml::table grown = method.grown_model(from, to, options, step);
  ConfigTable view(grown, fmt::format("{}'s grown model", method.name()));
  std::shared_ptr<const ModelSpec> spec = family.parse(view);
  view.finish();
  return spec;
}

}  // namespace tfw
