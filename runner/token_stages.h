// Which stage of a lineage made which parameter tokens: for a Pattention layer of a
// checkpoint's model, the token counts at which each stage of the lineage that made it ended
// (its ancestor runs in the store, and the growth events inside each run). `tfw attention` and
// the GUI's map mark a boundary after each stage, with the stage's name. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/commands/attention_map.h"

namespace tfw {
class Store;
}

namespace tfw::runner {

// The stages that added tokens to `projection` ("ffn": the model's n_ffn; q, k, v, o: its
// n_attn), oldest first, for the checkpoint's model: its run's ancestors in `store`, then each
// run's own growth events ([[train.growth]], [train.growth_repeat]) up to the checkpoint's step.
// A stage that left the count as it was is left out. Empty when the store does not know the
// checkpoint's run, or its configs give no count (a model without parameter tokens).
std::vector<AttentionStage> lineage_token_stages(Store& store, const std::string& checkpoint,
                                                 const std::string& projection);

// The stages of a map of `checkpoint`'s layer with `parameter_tokens` tokens, from the store of
// `home` (TFW_HOME): lineage_token_stages when the store knows the checkpoint and its counts end
// at the layer's, else none (the map then marks only the tokens at the layer's creation).
// Never throws: a missing or unreadable store gives none.
std::vector<AttentionStage> attention_stages(const std::string& home, const std::string& checkpoint,
                                             const std::string& projection, std::int64_t parameter_tokens);

}  // namespace tfw::runner
