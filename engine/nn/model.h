// The model interfaces every model family plugin implements. A model family declares its
// task (engine/plugin/task.h); its models are a LanguageModel or an ImageClassifier, both a Model,
// which is what the trainer, checkpoints, growth and masks see.
// Shapes: B batch, T sequence length, d width, V vocabulary, C channels, H×W image, K classes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/libtorch.h"

#include "engine/plugin/plugin_api.h"
#include "engine/plugin/task.h"

namespace tfw {

struct KVCache;  // engine/nn/attention.h

class Model : public torch::nn::Module {
 public:
  // The input batch -> logits: ids (B, T) int64 -> (B, T, V) for a language model; images
  // (B, C, H, W) float -> (B, K) for an image classifier.
  virtual torch::Tensor forward(const torch::Tensor& input) = 0;
  // The training step the model computes at: the trainer sets it before every step and every
  // evaluation, checkpoint_load sets the checkpoint's step. A model whose function depends on
  // it (msg's masks ramping from 0 to 1, docs/growth.md) reads it; the rest ignore it.
  virtual void set_training_step(std::int64_t step) { (void)step; }
};

class LanguageModel : public Model {
 public:
  // ids (B, T) int64 -> logits (B, T, V).
  torch::Tensor forward(const torch::Tensor& ids) override = 0;
  // ids (B, T) -> the final-normed hidden states (B, T, d) the logits are read from.
  virtual torch::Tensor hidden(const torch::Tensor& ids) = 0;
  // The token embedding E (V, d); the logits are hidden · Eᵀ (tied).
  virtual torch::Tensor token_embedding() = 0;
  // Generation a token at a time: the logits (B, T, V) of `ids` (B, T), the positions that
  // follow the cache's, whose keys and values it then holds too. A family without a cache
  // returns an undefined tensor (the default), and the caller runs forward() on the whole
  // sequence instead.
  virtual torch::Tensor forward_cached(const torch::Tensor& ids, KVCache& cache) {
    (void)ids;
    (void)cache;
    return {};
  }
};

// How an image classifier cuts an image into the tokens its blocks read: a rows × cols grid
// of patch × patch pixels, in row-major order, after `leading` tokens that are not patches
// (a class token). The parameter-attention view draws a token's map over this grid.
struct PatchGrid {
  std::int64_t rows = 0, cols = 0, patch = 0, channels = 0, leading = 0;
  std::int64_t tokens() const { return leading + rows * cols; }
};

class ImageClassifier : public Model {
 public:
  // images (B, C, H, W) float -> logits (B, K).
  torch::Tensor forward(const torch::Tensor& images) override = 0;
  virtual PatchGrid patch_grid() const = 0;
};

// `model` as a language model, or a UsageError saying that `what` (a command) needs one.
std::shared_ptr<LanguageModel> as_language_model(const std::shared_ptr<Model>& model, const std::string& what);
std::shared_ptr<ImageClassifier> as_image_classifier(const std::shared_ptr<Model>& model, const std::string& what);

// Throws the UsageError of a family asked to build another family's spec.
[[noreturn]] void family_spec_mismatch(const std::string& family, const ModelSpec& spec);

// A model family's identity, stated once: what `tfw plugins` lists.
struct FamilyIdentity {
  std::string name;
  std::string description;
  std::vector<std::string> growth_methods;  // the methods that grow its models
  std::string task = kLanguageModelTask;    // engine/plugin/task.h
};

// A family whose models are built from its own Spec: a plugin's family derives from
// FamilyOf<Spec>, states its identity and its build function once, and writes parse().
// build() takes `spec` as a Spec (else family_spec_mismatch) and builds after seeding torch
// with `seed`, so that a build is deterministic in it.
template <class Spec>
class FamilyOf : public ModelFamily {
 public:
  using Build = std::function<std::shared_ptr<Model>(const Spec&)>;
  FamilyOf(FamilyIdentity identity, Build build) : identity_(std::move(identity)), build_(std::move(build)) {}
  std::string name() const override { return identity_.name; }
  std::string version() const override { return built_version(); }  // engine/plugin/plugin_api.h
  std::string description() const override { return identity_.description; }
  std::string task() const override { return identity_.task; }
  std::vector<std::string> growth_methods() const override { return identity_.growth_methods; }
  std::shared_ptr<Model> build(const ModelSpec& spec, std::uint64_t seed) const override {
    const auto* own = dynamic_cast<const Spec*>(&spec);
    if (own == nullptr) family_spec_mismatch(name(), spec);
    torch::manual_seed(seed);
    return build_(*own);
  }

 private:
  FamilyIdentity identity_;
  Build build_;
};

}  // namespace tfw
