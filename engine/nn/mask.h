// Parameter masks (docs/configs.md, "Parameter masks"): named ranges of parameter tokens per
// projection ([train.mask] in a run config), of which a run uses some. Every Pattention layer
// then computes with the tokens of the used blocks' ranges for its projection only: the
// others add nothing to its output or to its score normalisation, get a zero gradient, and
// (through MaskedTokenHold) are not moved by the optimiser's weight decay or momentum either.
#pragma once

#include <string>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/nn/mask_use.h"
#include "engine/config/run_config.h"

namespace tfw {

// A layer's projection: the last part of its label ("layers.3.q" -> "q"). A block's range for
// "attn" covers q, k, v and o; a range for the projection itself wins over "attn".
std::string pattention_projection(const std::string& label);

// Masks every Pattention of `model` to the union of the ranges that the blocks `use` give its
// projection. A projection none of the used blocks names keeps all its tokens. An empty `use`
// clears every mask. Returns a one-line description ("2 blocks: 96 of 192 attention tokens, ...").
// Throws UsageError for a block not in `config`, a range past a layer's tokens, a projection
// no layer of the model has, or a model without Pattention layers.
std::string mask_apply(torch::nn::Module& model, const MaskConfig& config, const std::vector<std::string>& use);

// Each Pattention of `model`, in order, with its tokens in use under its current mask (all of
// them when unmasked).
std::vector<MaskLayerUse> mask_layer_use(torch::nn::Module& model);

// Holds the masked tokens of every masked Pattention still across an optimiser step: save()
// before, restore() after. AdamW's decoupled weight decay (and momentum left from before the
// mask) would move them even though their gradient is zero.
class MaskedTokenHold {
 public:
  explicit MaskedTokenHold(torch::nn::Module& model) { refresh(model); }
  void refresh(torch::nn::Module& model);  // after the model or its masks changed
  bool empty() const { return layers_.empty(); }
  void save();
  void restore();

 private:
  struct Held {
    torch::Tensor keys, values, masked;  // the parameters, and the indices of the masked tokens
    torch::Tensor saved_keys, saved_values;
  };
  std::vector<Held> layers_;
};

}  // namespace tfw
