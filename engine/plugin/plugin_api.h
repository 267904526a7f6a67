// The plugin API: what a model family or a growth method plugin implements, and the two
// C symbols a plugin shared library exports. Torch-free on purpose, so that the CLI
// plumbing (params, flops, plugins) compiles without torch headers; models are reached
// through the forward-declared Model (engine/nn/model.h).
//
// A plugin exports
//   extern "C" int  tfw_plugin_api_version();                // checked before anything else
//   extern "C" void tfw_plugin_register(tfw::PluginRegistrar&);
// Use the TFW_PLUGIN(registrar) macro below to define both.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "engine/core/config_table.h"

namespace tfw {

// Bumped whenever an interface below changes layout or meaning. A plugin built for
// another version is refused, never loaded.
inline constexpr int kPluginApiVersion = 5;  // 2: LanguageModel::forward_cached; 3: GrowthMethod::grows;
                                             // 4: LanguageModel::set_training_step, GrowthMethod::grown_model;
                                             // 5: ModelFamily::task, Model, FlopsPerToken::per_example

class Model;  // engine/nn/model.h (torch): a LanguageModel or an ImageClassifier

// Forward FLOPs of one token at sequence length seq_len, split as in the paper's Table 3
// (a multiply-add counts 2). Training FLOPs = 3 x forward (backward = 2 x forward).
// An example is seq_len tokens (a language model's window, an image's patch tokens and
// class token); per_example holds what is computed once per example rather than per token
// (an image classifier's patch embedding and head; 0 for a language model).
struct FlopsPerToken {
  std::int64_t seq_len = 0;
  std::int64_t token_parameter = 0;  // 2·N, N the non-embedding projection parameters
  std::int64_t token_token = 0;      // 4·L·d_attn·T: q·kᵀ and attention·v
  std::int64_t embedding = 0;        // 2·V·d: the tied logits (de-embedding)
  std::int64_t per_example = 0;      // once per example (patch embedding, classifier head)
  std::int64_t forward() const { return token_parameter + token_token + embedding; }
  std::int64_t training() const { return 3 * forward(); }
  std::int64_t forward_per_example() const { return seq_len * forward() + per_example; }
  std::int64_t training_per_example() const { return 3 * forward_per_example(); }
};

// The architecture numbers every family shares (for tables, the GUI and growth plans).
// For an image classifier, vocab is the number of classes and seq_len its tokens per image.
struct ModelShape {
  std::int64_t layers = 0;
  std::int64_t d = 0;
  std::int64_t heads = 0;
  std::int64_t vocab = 0;
  std::int64_t seq_len = 0;                   // context length the model is built for
  std::int64_t image_size = 0, channels = 0;  // an image classifier's square images (0 otherwise)
};

// A parsed and validated model configuration of one family.
class ModelSpec {
 public:
  virtual ~ModelSpec() = default;
  virtual std::string family() const = 0;
  virtual ModelShape shape() const = 0;
  virtual std::int64_t parameter_count() const = 0;
  virtual std::int64_t embedding_parameter_count() const = 0;
  virtual FlopsPerToken flops_per_token(std::int64_t seq_len) const = 0;
  virtual toml::table to_toml() const = 0;  // the resolved [model] table, defaults filled in
  virtual std::string summary() const = 0;  // one line: "L=12 d=768 H=12 n_attn=768 ..."
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  virtual std::string description() const = 0;
  // The task its models do (engine/plugin/task.h): "language_model" (a LanguageModel) or
  // "image_classification" (an ImageClassifier). The task decides the [data] table, the
  // batches, the loss and the metrics.
  virtual std::string task() const { return "language_model"; }
  // Reads the [model] table (every key through `table`; the caller calls finish()).
  // Throws UsageError with file:line:col for a bad value.
  virtual std::shared_ptr<const ModelSpec> parse(ConfigTable& table) const = 0;
  // Builds a freshly initialised model (float32, CPU) with the given seed.
  virtual std::shared_ptr<Model> build(const ModelSpec& spec, std::uint64_t seed) const = 0;
  virtual std::vector<std::string> growth_methods() const = 0;
};

// What a growth would do, for `tfw grow` and the schedule designer.
struct GrowthPlan {
  std::vector<std::string> changes;  // human-readable lines
  bool exact = false;                // the method's declared exactness for these options
};

class GrowthMethod {
 public:
  virtual ~GrowthMethod() = default;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  virtual std::string family() const = 0;  // the model family it grows
  virtual bool declared_exact(const toml::table& options) const = 0;
  // Validates and explains; throws UsageError with the reason for an impossible growth.
  virtual GrowthPlan plan(const ModelSpec& from, const ModelSpec& to, const toml::table& options) const = 0;
  // Returns the grown model: `model` itself grown in place (then existing parameters keep
  // their identity and only gain rows, so an optimiser's state can be extended with
  // engine/nn/growth.h), or a new model built with `family` at `to`'s size. Deterministic in
  // `seed`. Call plan() first: apply assumes a valid growth.
  virtual std::shared_ptr<Model> apply(Model& model, const ModelFamily& family, const ModelSpec& from,
                                       const ModelSpec& to, const toml::table& options, std::uint64_t seed) const = 0;
  // Whether apply() grows the model in place (so AdamW moments can be extended).
  virtual bool in_place() const = 0;
  // Whether it grows models of `family` (a method for several families says so here; family()
  // then names them for people).
  virtual bool grows(const std::string& family) const { return family == this->family(); }
  // The grown model's [model] table, as the run's config and its checkpoints keep it, for a
  // growth at the run's step `step` (0 for `tfw grow`): `to`'s own by default. A method whose
  // grown model carries state of its own adds it here (msg: which structures are new and
  // their mask ramp), and apply() then receives `to` parsed from this table.
  virtual toml::table grown_model(const ModelSpec& from, const ModelSpec& to, const toml::table& options,
                                  std::int64_t step) const {
    (void)from;
    (void)options;
    (void)step;
    return to.to_toml();
  }
};

// The version the including file was built as: TFW_VERSION, which tfw's build defines for every
// target that links its libraries (engine/CMakeLists.txt); "unversioned" in a file compiled
// without it (the parsers' fuzz targets, a plugin compiled by hand).
inline std::string built_version() {
#ifdef TFW_VERSION
  return TFW_VERSION;
#else
  return "unversioned";
#endif
}

// A growth method's identity, stated once: its name, the families it grows and whether it
// grows the model in place. A plugin's method derives from NamedGrowthMethod and writes only
// the growth (declared_exact, plan, apply, and grown_model where it adds state).
struct GrowthMethodIdentity {
  std::string name;
  std::vector<std::string> families;  // family() names them for people, joined by ", "
  bool in_place = false;
};

class NamedGrowthMethod : public GrowthMethod {
 public:
  explicit NamedGrowthMethod(GrowthMethodIdentity identity) : identity_(std::move(identity)) {}
  std::string name() const override { return identity_.name; }
  std::string version() const override { return built_version(); }
  std::string family() const override {
    std::string out;
    for (const std::string& family : identity_.families) out += (out.empty() ? "" : ", ") + family;
    return out;
  }
  bool grows(const std::string& family) const override {
    return std::find(identity_.families.begin(), identity_.families.end(), family) != identity_.families.end();
  }
  bool in_place() const override { return identity_.in_place; }

 private:
  GrowthMethodIdentity identity_;
};

// The part of the registry a plugin sees.
class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;
  virtual void add_model_family(std::shared_ptr<const ModelFamily> family) = 0;
  virtual void add_growth_method(std::shared_ptr<const GrowthMethod> method) = 0;
};

}  // namespace tfw

#define TFW_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

#define TFW_PLUGIN(registrar)                                                       \
  TFW_PLUGIN_EXPORT int tfw_plugin_api_version() { return tfw::kPluginApiVersion; } \
  TFW_PLUGIN_EXPORT void tfw_plugin_register(tfw::PluginRegistrar& registrar)
