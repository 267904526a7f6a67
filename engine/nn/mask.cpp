// Parameter masks. See mask.h and docs/configs.md, "Parameter masks".
#include "engine/nn/mask.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/nn/pattention.h"

namespace tfw {

namespace {

const std::set<std::string> kAttnProjections = {"q", "k", "v", "o"};

std::vector<PattentionImpl*> pattentions(torch::nn::Module& model) {
  std::vector<PattentionImpl*> layers;
  for (const std::shared_ptr<torch::nn::Module>& module : model.modules(/*include_self=*/true)) {
    if (auto* p = dynamic_cast<PattentionImpl*>(module.get())) layers.push_back(p);
  }
  return layers;
}

}  // namespace

std::string pattention_projection(const std::string& label) {
  const std::size_t dot = label.rfind('.');
  return dot == std::string::npos ? label : label.substr(dot + 1);
}

std::string mask_apply(torch::nn::Module& model, const MaskConfig& config, const std::vector<std::string>& use) {
  const std::vector<PattentionImpl*> layers = pattentions(model);
  if (use.empty()) {
    for (PattentionImpl* layer : layers) layer->set_active_tokens({});
    return "no mask";
  }
  if (layers.empty()) {
    throw UsageError(with_hint("train.mask selects parameter tokens, and this model has no Pattention layers",
                               "masks work on the tokenformer family; remove [train.mask] for this model"));
  }
  std::vector<const MaskBlock*> blocks;
  for (const std::string& name : use) {
    const MaskBlock* block = config.block(name);
    if (block == nullptr) {
      std::vector<std::string> names;
      for (const MaskBlock& b : config.blocks) names.push_back(b.name);
      throw UsageError(with_hint(fmt::format("no parameter block named '{}'", name),
                                 names.empty() ? std::string("the run defines no [train.mask.blocks]")
                                               : fmt::format("the run's blocks are: {}", fmt::join(names, ", "))));
    }
    blocks.push_back(block);
  }
  // Every projection a block names must exist in the model.
  std::set<std::string> projections;
  for (PattentionImpl* layer : layers) projections.insert(pattention_projection(layer->options().label()));
  for (const MaskBlock* block : blocks) {
    for (const MaskRange& r : block->ranges) {
      const bool known = r.projection == "attn"
                             ? std::any_of(kAttnProjections.begin(), kAttnProjections.end(),
                                           [&](const std::string& p) { return projections.count(p) > 0; })
                             : projections.count(r.projection) > 0;
      if (!known) {
        throw UsageError(with_hint(
            fmt::format("parameter block '{}' names projection '{}', which no Pattention layer of "
                        "this model has",
                        block->name, r.projection),
            fmt::format("the model's projections are: {} (attn: q, k, v and o)", fmt::join(projections, ", "))));
      }
    }
  }
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> used;  // projection -> (tokens in use, tokens)
  for (PattentionImpl* layer : layers) {
    const std::string projection = pattention_projection(layer->options().label());
    const std::int64_t n = layer->tokens();
    std::vector<bool> keep(static_cast<std::size_t>(n), false);
    bool named = false;
    for (const MaskBlock* block : blocks) {
      // The block's range for this projection: its own, else its "attn" one for q, k, v, o.
      const MaskRange* range = nullptr;
      for (const MaskRange& r : block->ranges) {
        if (r.projection == projection) range = &r;
      }
      if (range == nullptr && kAttnProjections.count(projection)) {
        for (const MaskRange& r : block->ranges) {
          if (r.projection == "attn") range = &r;
        }
      }
      if (range == nullptr) continue;
      named = true;
      if (range->end > n) {
        throw UsageError(with_hint(
            fmt::format("parameter block '{}': the range [{}, {}] of '{}' goes past {}'s {} tokens", block->name,
                        range->start, range->end, range->projection, layer->options().label(), n),
            "keep each range inside the model's n_attn (attn, q, k, v, o) or n_ffn (ffn)"));
      }
      for (std::int64_t i = range->start; i < range->end; ++i) keep[static_cast<std::size_t>(i)] = true;
    }
    if (!named) {
      layer->set_active_tokens({});
      used[projection].first += n;
      used[projection].second += n;
      continue;
    }
    std::vector<std::int64_t> indices;
    for (std::int64_t i = 0; i < n; ++i) {
      if (keep[static_cast<std::size_t>(i)]) indices.push_back(i);
    }
    layer->set_active_tokens(
        torch::tensor(indices, torch::TensorOptions().dtype(torch::kInt64)).to(layer->keys.device()));
    used[projection].first += static_cast<std::int64_t>(indices.size());
    used[projection].second += n;
  }
  std::vector<std::string> parts;
  for (const auto& [projection, counts] : used) {
    parts.push_back(fmt::format("{} {}/{}", projection, counts.first, counts.second));
  }
  return fmt::format("blocks {}: tokens in use {}", mask_label(use), fmt::join(parts, ", "));
}

std::vector<MaskLayerUse> mask_layer_use(torch::nn::Module& model) {
  std::vector<MaskLayerUse> out;
  for (PattentionImpl* layer : pattentions(model)) {
    const torch::Tensor& active = layer->active_tokens();
    const std::int64_t n = layer->tokens();
    out.push_back({layer->options().label(), active.defined() ? active.numel() : n, n});
  }
  return out;
}

void MaskedTokenHold::refresh(torch::nn::Module& model) {
  layers_.clear();
  for (PattentionImpl* layer : pattentions(model)) {
    const torch::Tensor& active = layer->active_tokens();
    if (!active.defined()) continue;
    torch::Tensor all =
        torch::ones({layer->tokens()}, torch::TensorOptions().dtype(torch::kBool).device(active.device()));
    all.index_fill_(0, active, false);
    torch::Tensor masked = all.nonzero().flatten();
    if (masked.numel() == 0) continue;
    layers_.push_back({layer->keys, layer->values, masked, {}, {}});
  }
}

void MaskedTokenHold::save() {
  torch::NoGradGuard no_grad;
  for (Held& h : layers_) {
    h.saved_keys = h.keys.index_select(0, h.masked);
    h.saved_values = h.values.index_select(0, h.masked);
  }
}

void MaskedTokenHold::restore() {
  torch::NoGradGuard no_grad;
  for (Held& h : layers_) {
    h.keys.index_copy_(0, h.masked, h.saved_keys);
    h.values.index_copy_(0, h.masked, h.saved_values);
  }
}

}  // namespace tfw
