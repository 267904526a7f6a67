// What a parameter mask leaves in use, layer by layer (engine/nn/mask.h computes it; `tfw eval`
// prints it). Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace tfw {

struct MaskLayerUse {
  std::string layer;        // the Pattention's label ("layers.0.q")
  std::int64_t active = 0;  // tokens in use
  std::int64_t tokens = 0;  // tokens it has
};

}  // namespace tfw
