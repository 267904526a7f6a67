#include "engine/nn/token_use.h"

namespace tfw {

namespace {

// The mean L2 norm of rows [begin, end) of `rows`.
double mean_row_norm(const torch::Tensor& rows, std::int64_t begin, std::int64_t end) {
  torch::NoGradGuard no_grad;
  return rows.narrow(0, begin, end - begin).to(torch::kFloat64).norm(2, {1}).mean().item<double>();
}

}  // namespace

TokenUseMeter::TokenUseMeter(Model& model) {
  for (const auto& item : model.named_modules()) {
    auto* layer = dynamic_cast<PattentionImpl*>(item.value().get());
    if (layer == nullptr) continue;
    const std::int64_t n = layer->keys.size(0), n0 = layer->n0.item<std::int64_t>();
    if (n <= n0 || n0 <= 0) continue;
    Layer& entry = layers_[layer->options().label()];
    entry.module = layer;
    entry.n = n;
    entry.n0 = n0;
  }
}

ScoreCapture::Sink TokenUseMeter::sink() {
  return [this](const std::string& label, const torch::Tensor& scores) {
    auto it = layers_.find(label);
    if (it != layers_.end() && scores.size(-1) == it->second.n) add(it->second, scores);
  };
}

void TokenUseMeter::add(Layer& layer, const torch::Tensor& scores) {
  torch::NoGradGuard no_grad;
  const std::int64_t m = layer.n - layer.n0;
  const torch::Tensor a = scores.detach().to(torch::kFloat64).abs().reshape({-1, layer.n});  // (rows, n)
  const torch::Tensor old = a.narrow(1, 0, layer.n0), appended = a.narrow(1, layer.n0, m);
  const torch::Tensor old_sum = old.sum(), appended_sum = appended.sum();
  layer.old_sum = layer.old_sum.defined() ? layer.old_sum + old_sum : old_sum;
  layer.appended_sum = layer.appended_sum.defined() ? layer.appended_sum + appended_sum : appended_sum;
  layer.old_count += static_cast<double>(old.numel());
  const torch::Tensor most = std::get<0>(appended.max(0));  // (m)
  layer.appended_max = layer.appended_max.defined() ? torch::maximum(layer.appended_max, most) : most;
}

std::vector<Metric> TokenUseMeter::metrics() const {
  std::vector<Metric> out;
  double mass = 0, active = 0;
  int seen = 0;
  for (const auto& [label, layer] : layers_) {
    if (!layer.appended_max.defined()) continue;
    const double old_sum = layer.old_sum.item<double>(), appended_sum = layer.appended_sum.item<double>();
    if (old_sum + appended_sum <= 0) continue;
    const double appended_mass = appended_sum / (old_sum + appended_sum);
    const double threshold = kTokenUseThreshold * old_sum / layer.old_count;
    const double appended_active = (layer.appended_max > threshold).to(torch::kFloat64).mean().item<double>();
    const std::string prefix = "token_use/" + label + "/";
    out.push_back({prefix + "appended_mass", appended_mass});
    out.push_back({prefix + "appended_active", appended_active});
    out.push_back({prefix + "key_norm_old", mean_row_norm(layer.module->keys, 0, layer.n0)});
    out.push_back({prefix + "key_norm_new", mean_row_norm(layer.module->keys, layer.n0, layer.n)});
    out.push_back({prefix + "value_norm_old", mean_row_norm(layer.module->values, 0, layer.n0)});
    out.push_back({prefix + "value_norm_new", mean_row_norm(layer.module->values, layer.n0, layer.n)});
    mass += appended_mass;
    active += appended_active;
    ++seen;
  }
  if (seen > 0) {
    out.push_back({"token_use/appended_mass", mass / seen});
    out.push_back({"token_use/appended_active", active / seen});
  }
  return out;
}

}  // namespace tfw
