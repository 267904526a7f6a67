// The model interfaces' helpers. See model.h.
#include "engine/nn/model.h"

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/plugin/plugin_api.h"

namespace tfw {

std::shared_ptr<LanguageModel> as_language_model(const std::shared_ptr<Model>& model, const std::string& what) {
  auto lm = std::dynamic_pointer_cast<LanguageModel>(model);
  if (lm == nullptr) {
    throw UsageError(with_hint(fmt::format("{} needs a language model; this model is an image classifier", what),
                               "for an image classifier, use tfw eval (test loss and accuracy) or tfw attention "
                               "--image N (its parameter-attention maps over the patches)"));
  }
  return lm;
}

std::shared_ptr<ImageClassifier> as_image_classifier(const std::shared_ptr<Model>& model, const std::string& what) {
  auto classifier = std::dynamic_pointer_cast<ImageClassifier>(model);
  if (classifier == nullptr) {
    throw UsageError(with_hint(fmt::format("{} needs an image classifier; this model is a language model", what),
                               "give a checkpoint of a vit or vision_tokenformer run"));
  }
  return classifier;
}

void family_spec_mismatch(const std::string& family, const ModelSpec& spec) {
  throw UsageError(fmt::format("the {} family cannot build a '{}' model", family, spec.family()));
}

}  // namespace tfw
