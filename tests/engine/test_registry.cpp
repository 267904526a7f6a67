// The plugin registry: in-tree plugins, an out-of-tree plugin from another folder, a plugin
// built for another API version (refused, never registered), a library that is not a plugin.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/nn/model.h"
#include "engine/plugin/registry.h"
#include "tests/support.h"

namespace tfw {
namespace test_registry {

const std::string kSampleDir = TFW_SAMPLE_PLUGIN_DIR;

TEST(Registry, LoadsInTreeFamiliesAndGrowthMethods) {
  Registry registry;
  registry.load_folder(TFW_PLUGIN_DIR, "built-in");
  std::vector<std::string> families, methods;
  for (const PluginEntry& entry : registry.entries()) {
    (entry.kind == "model-family" ? families : methods).push_back(entry.name);
    EXPECT_EQ(entry.origin, "built-in");
    EXPECT_EQ(entry.version, TFW_VERSION);
  }
  EXPECT_EQ(families, (std::vector<std::string>{"tokenformer", "transformer", "vit", "vision_tokenformer"}));
  // msg is registered by the transformer plugin, whose model it masks.
  EXPECT_EQ(methods, (std::vector<std::string>{"depth_grow", "stack", "hypercloning", "net2net", "pattention_grow",
                                               "script", "msg"}));
  EXPECT_TRUE(registry.rejected().empty());
  EXPECT_EQ(registry.family("transformer").growth_methods(),
            (std::vector<std::string>{"net2net", "hypercloning", "depth_grow", "stack", "msg"}));
  EXPECT_TRUE(registry.growth_method("msg").grows("transformer"));
  EXPECT_FALSE(registry.growth_method("msg").grows("tokenformer"));
  EXPECT_EQ(registry.growth_method("pattention_grow").family(), "tokenformer, vision_tokenformer");
  EXPECT_TRUE(registry.growth_method("pattention_grow").grows("vision_tokenformer"));
  EXPECT_FALSE(registry.growth_method("pattention_grow").grows("vit"));
  // Families declare their task.
  EXPECT_EQ(registry.family("vit").task(), "image_classification");
  EXPECT_EQ(registry.family("transformer").task(), "language_model");
  // A method for several families says which it grows.
  EXPECT_TRUE(registry.growth_method("depth_grow").grows("transformer"));
  EXPECT_TRUE(registry.growth_method("depth_grow").grows("tokenformer"));
  EXPECT_FALSE(registry.growth_method("pattention_grow").grows("transformer"));
}

TEST(Registry, OutOfTreePluginIsFoundBuiltAndRun) {
  Registry registry;
  registry.load_folder(kSampleDir + "/good", "TFW_PLUGIN_PATH");
  ASSERT_EQ(registry.entries().size(), 1u) << (registry.rejected().empty() ? "" : registry.rejected()[0].reason);
  EXPECT_EQ(registry.entries()[0].name, "bigram");
  EXPECT_EQ(registry.entries()[0].version, "0.0.1-sample");
  EXPECT_EQ(registry.entries()[0].origin, "TFW_PLUGIN_PATH");

  toml::table table = toml::parse(std::string_view("family = \"bigram\"\n[model]\nd = 8\nvocab = 32\n"),
                                  std::string_view("bigram.toml"));
  ModelConfig config = model_config_parse(registry, table, "bigram.toml");
  EXPECT_EQ(config.spec->parameter_count(), 32 * 8 + 8 * 8);
  std::shared_ptr<Model> model = registry.family("bigram").build(*config.spec, 0);
  torch::Tensor logits = model->forward(torch::randint(32, {2, 5}, torch::kInt64));
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{2, 5, 32}));
}

TEST(Registry, PluginForAnotherApiVersionIsRefused) {
  Registry registry;
  registry.load_folder(kSampleDir + "/wrong_version", "TFW_PLUGIN_PATH");
  EXPECT_TRUE(registry.entries().empty());
  ASSERT_EQ(registry.rejected().size(), 1u);
  EXPECT_NE(registry.rejected()[0].reason.find("built for plugin API version " + std::to_string(kPluginApiVersion + 1) +
                                               ", this tfw has version " + std::to_string(kPluginApiVersion)),
            std::string::npos)
      << registry.rejected()[0].reason;
  EXPECT_THROW(registry.family("bigram"), UsageError);
}

TEST(Registry, NonPluginLibrariesAndDuplicatesAreRefusedWithReasons) {
  auto dir = std::filesystem::temp_directory_path() / "tfw-test-registry";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "garbage.so") << "not an ELF file";
  Registry registry;
  registry.load_folder(dir.string(), "TFW_PLUGIN_PATH");
  ASSERT_EQ(registry.rejected().size(), 1u);
  EXPECT_NE(registry.rejected()[0].reason.find("cannot load"), std::string::npos);

  registry.load_file(kSampleDir + "/good/tfw-bigram.so", "TFW_PLUGIN_PATH");
  registry.load_file(kSampleDir + "/good/tfw-bigram.so", "TFW_PLUGIN_PATH");
  EXPECT_EQ(registry.entries().size(), 1u);
  ASSERT_EQ(registry.rejected().size(), 2u);
  EXPECT_NE(registry.rejected()[1].reason.find("already registered"), std::string::npos);
}

TEST(Registry, UnknownNamesListTheKnownOnes) {
  try {
    test::plugins().family("mamba");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("known families: tokenformer, transformer"), std::string::npos);
  }
  EXPECT_THROW(test::plugins().growth_method("no_such_method"), UsageError);
}

}  // namespace test_registry
}  // namespace tfw
