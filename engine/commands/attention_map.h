// Parameter-attention maps: which parameter tokens the input tokens attend to in one
// Pattention layer (for an image classifier the input tokens are its patches) (the scores Θ(S) of
// docs/design/TOKENFORMER.md §1, input tokens × parameter tokens), and the validation-text contexts that activate one
// parameter token most. Used by `tfw attention` and the GUI's attention panel. Torch-free header: the loaded model
// lives behind a pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tfw {

class Registry;

// The image an image classifier's map was computed on: its patches are the input tokens.
struct AttentionImage {
  std::int64_t index = 0;  // in the validation split
  std::int64_t height = 0, width = 0, channels = 0;
  std::vector<float> pixels;                   // height × width × channels, in [0, 1], row-major
  std::int64_t rows = 0, cols = 0, patch = 0;  // the patch grid
  std::int64_t leading = 0;                    // input tokens before the patches (the class token)
  std::int64_t label = 0, predicted = 0;
};

// A stage of the lineage that made a model, and how many of a layer's parameter tokens it
// left: its tokens are the columns from the stage before's count up to this one.
struct AttentionStage {
  std::string name;  // the run ("small-s1"), or a growth event inside a run ("grown-s1@500")
  std::int64_t tokens = 0;
};

struct AttentionMap {
  std::string label;                // "layers.3.q"
  std::vector<std::string> tokens;  // the input tokens as text (one per row)
  std::int64_t parameter_tokens = 0;
  // The layer's parameter tokens when it was created; the ones after it were appended by
  // growth (0: not known).
  std::int64_t tokens_at_creation = 0;
  // The lineage's stages that added tokens to this layer, oldest first, the last one's count
  // parameter_tokens (set by the caller from the store: runner/token_stages.h; empty when not
  // known). A boundary lies after each stage but the last.
  std::vector<AttentionStage> stages;
  std::vector<float> scores;            // tokens.size() × parameter_tokens, row-major, Θ(S)
  bool truncated = false;               // the text was longer than the model's context
  std::optional<AttentionImage> image;  // an image classifier's input (tokens: "cls", "r0c0", ...)
  // An image's map: the parameter token with the largest total score over the patches (the
  // one `tfw attention --image` and the GUI show when none is chosen); -1 without an image.
  std::int64_t strongest_over_patches() const {
    if (!image) return -1;
    std::int64_t best = 0;
    double best_total = -1e300;
    for (std::int64_t j = 0; j < parameter_tokens; ++j) {
      double total = 0;
      for (std::size_t i = static_cast<std::size_t>(image->leading); i < tokens.size(); ++i) total += at(i, j);
      if (total > best_total) best_total = total, best = j;
    }
    return best;
  }
  // The stages to mark: `stages`, else the layer's created and appended tokens when it grew
  // (its own count at creation), else none.
  std::vector<AttentionStage> marked_stages() const {
    if (!stages.empty()) return stages;
    if (tokens_at_creation <= 0 || tokens_at_creation >= parameter_tokens) return {};
    return {{"created", tokens_at_creation}, {"grown", parameter_tokens}};
  }
  float at(std::size_t row, std::int64_t column) const {
    return scores[row * static_cast<std::size_t>(parameter_tokens) + static_cast<std::size_t>(column)];
  }
};

// The stages as a legend, "; stages: small 0-15, grown 16-31" ("" for fewer than two); more
// than six are counted, not named.
inline std::string attention_stages_text(const std::vector<AttentionStage>& stages) {
  if (stages.size() < 2) return "";
  if (stages.size() > 6) return "; " + std::to_string(stages.size()) + " stages, a line between each two";
  std::string text = "; stages:";
  std::int64_t begin = 0;
  for (const AttentionStage& stage : stages) {
    text += (begin == 0 ? " " : ", ") + stage.name + " " + std::to_string(begin) + "\u2013" +
            std::to_string(stage.tokens - 1);
    begin = stage.tokens;
  }
  return text;
}

// One place in the validation text where a parameter token scored high.
struct ActivatingContext {
  std::string before, token, after;  // the text around the input token, and the token itself
  float score = 0;
  std::int64_t position = 0;  // token offset in the validation shard
};

// A checkpoint loaded for inspection (no optimiser). Throws UsageError naming the path and
// the fix for a missing or corrupt checkpoint, a model without Pattention layers, a layer
// or projection that does not exist.
class AttentionProbe {
 public:
  // `home` (TFW_HOME) is where the validation shards live, for top_contexts.
  AttentionProbe(const Registry& registry, const std::string& checkpoint, const std::string& home = "");
  ~AttentionProbe();
  AttentionProbe(const AttentionProbe&) = delete;
  AttentionProbe& operator=(const AttentionProbe&) = delete;

  const std::string& family() const;
  std::int64_t layers() const;
  std::int64_t context() const;                  // the model's sequence length
  std::vector<std::string> projections() const;  // q k v o ffn
  std::int64_t parameter_tokens(std::int64_t layer, const std::string& projection) const;

  AttentionMap map(const std::string& text, std::int64_t layer, const std::string& projection);

  // Image classifiers (images() > 0): the map of validation image `index` (the run's
  // validation split, unaugmented), its input tokens the class token and the patches.
  bool image_model() const;
  std::int64_t images();  // the validation split's size (read on first use)
  AttentionMap image_map(std::int64_t index, std::int64_t layer, const std::string& projection);

  // The k highest scores of `parameter_token` over `windows` fixed validation windows of the
  // run's corpus (the trainer's evaluation windows), one per position, best first.
  std::vector<ActivatingContext> top_contexts(std::int64_t layer, const std::string& projection,
                                              std::int64_t parameter_token, int k = 10, std::int64_t windows = 4);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The input token as a one-line label: control characters and newlines escaped.
std::string token_label(const std::string& piece);
// The same for a row of a map, where a space must be seen: spaces shown as ␣ (U+2423), an
// empty token as "(empty)".
std::string token_row_label(const std::string& piece);

}  // namespace tfw
