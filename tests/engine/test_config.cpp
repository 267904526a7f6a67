// Config files: typed values, defaults, --set overrides, and the error messages a user
// sees for a missing file, a syntax error, an unknown key, a wrong type or a bad value.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/config/data_keys.h"
#include "engine/config/run_config.h"
#include "engine/config/train_keys.h"
#include "engine/machine/device.h"
#include "tests/support.h"

namespace tfw {
namespace test_config {

const char* kTiny = R"(family = "tokenformer"
[model]
layers = 2
d = 16
heads = 2
n_attn = 8
n_ffn = 32
vocab = 64
)";

using test::usage_error;

std::string write_temp(const std::string& name, const std::string& text) {
  auto dir = std::filesystem::temp_directory_path() / "tfw-test-config";
  std::filesystem::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(Config, ParsesTypedValuesWithDefaults) {
  ModelConfig config = test::config_from_text(kTiny, "tiny.toml");
  EXPECT_EQ(config.name, "tiny");
  EXPECT_EQ(config.family, "tokenformer");
  ModelShape shape = config.spec->shape();
  EXPECT_EQ(shape.layers, 2);
  EXPECT_EQ(shape.d, 16);
  EXPECT_EQ(shape.seq_len, 1024);  // default
  toml::table resolved = config.spec->to_toml();
  EXPECT_EQ(resolved["pattention"]["norm"].value<std::string>(), "l2_gelu");
  EXPECT_EQ(resolved["pattention"]["tau"].value<std::string>(), "fixed");
  EXPECT_EQ(resolved["layernorm"]["affine"].value<bool>(), false);
  // value init 2 / (L · sqrt(d)) = 2 / (2 · 4)
  EXPECT_DOUBLE_EQ(*resolved["init"]["value_std"].value<double>(), 0.25);
}

TEST(Config, UnknownKeyNamesFileLineColumnAndSuggests) {
  std::string text = std::string(kTiny) + "n_atn = 4\n";
  std::string message = usage_error([&] { test::config_from_text(text, "bad.toml"); });
  EXPECT_NE(message.find("bad.toml:9:1: unknown key 'model.n_atn'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'n_attn'"), std::string::npos) << message;
}

TEST(Config, UnknownKeyInSubTableAndAtTopLevel) {
  std::string text = std::string(kTiny) + "[model.pattention]\nnrom = \"softmax\"\n";
  std::string message = usage_error([&] { test::config_from_text(text, "bad.toml"); });
  EXPECT_NE(message.find("bad.toml:10:1: unknown key 'model.pattention.nrom'"), std::string::npos) << message;
  message = usage_error([&] { test::config_from_text(std::string("colour = 1\n") + kTiny, "top.toml"); });
  EXPECT_NE(message.find("top.toml:1:1: unknown key 'colour'"), std::string::npos) << message;
}

TEST(Config, WrongTypeNamesKeyAndExpectedType) {
  std::string text = kTiny;
  text.replace(text.find("layers = 2"), 10, "layers = \"2\"");
  std::string message = usage_error([&] { test::config_from_text(text, "type.toml"); });
  EXPECT_NE(message.find("type.toml:3:10: model.layers: expected an integer, got a string"), std::string::npos)
      << message;
}

TEST(Config, BadValuesAreRefusedWithTheReason) {
  std::string text = std::string(kTiny) + "[model.pattention]\nnorm = \"l3\"\n";
  std::string message = usage_error([&] { test::config_from_text(text, "v.toml"); });
  EXPECT_NE(message.find("model.pattention.norm: 'l3' is not one of: l2_gelu, gelu_l2, gelu_l1, softmax"),
            std::string::npos)
      << message;
  text = kTiny;
  text.replace(text.find("heads = 2"), 9, "heads = 3");
  message = usage_error([&] { test::config_from_text(text, "h.toml"); });
  EXPECT_NE(message.find("h.toml:5:9: model.heads: d = 16 is not divisible by heads = 3"), std::string::npos)
      << message;
  text = kTiny;
  text.replace(text.find("d = 16"), 6, "d = -16");
  message = usage_error([&] { test::config_from_text(text, "n.toml"); });
  EXPECT_NE(message.find("model.d: must be positive, got -16"), std::string::npos) << message;
}

// train.tf32 (issue 35): off unless asked, kept in the resolved config when on, and refused
// on the CPU, where it would mean nothing.
TEST(Config, Tf32IsOffByDefaultAndOnlyForCuda) {
  const std::string base = std::string(kTiny) + "[train]\nmax_steps = 3\n";
  RunConfig plain = run_config_load(test::plugins(), write_temp("plain.toml", base));
  EXPECT_FALSE(plain.train.tf32);
  EXPECT_FALSE(run_config_to_toml(plain)["train"]["tf32"]);
  std::string message =
      usage_error([&] { run_config_load(test::plugins(), write_temp("tf32.toml", base + "tf32 = true\n")); });
  EXPECT_NE(message.find("tf32.toml:11:8: train.tf32: TF32 matrix products are a CUDA setting"), std::string::npos)
      << message;
  EXPECT_NE(message.find("set train.device = \"cuda\""), std::string::npos) << message;
}

// A config's identity (issue 36): the TOML text is derived from the typed config, and two
// files that say the same thing (other layout, comments, key order, an inline table) have one
// identity; an integer and a float of the same size do not, nor does any changed value.
TEST(Config, IdentityIsTheCanonicalFormNotTheText) {
  const std::string base = std::string(kTiny) + "[train]\nmax_steps = 3\nlr = 0.003\n";
  const RunConfig a = run_config_load(test::plugins(), write_temp("a.toml", base));
  const RunConfig b = run_config_load(
      test::plugins(), write_temp("b.toml",
                                  "# the same run, written another way\nfamily = \"tokenformer\"\nname = \"a\"\n"
                                  "model = { vocab = 64, n_ffn = 32, n_attn = 8, heads = 2, d = 16, layers = 2 }\n"
                                  "[train]\nlr = 3e-3 # 0.003\nmax_steps = 3\n"));
  EXPECT_EQ(config_identity(a), config_identity(b));
  EXPECT_EQ(config_identity(a).size(), 64u);  // SHA-256, hex
  // Derived, not kept: reading the derived text back gives the same config.
  const RunConfig again = run_config_parse(test::plugins(), toml::parse(run_config_text(a)), "a.toml");
  EXPECT_EQ(run_config_text(again), run_config_text(a));
  EXPECT_EQ(config_identity(again), config_identity(a));
  // What the trainer does on growth (the model changes) changes the text and the identity.
  toml::table model = a.model.spec->to_toml();
  model.insert_or_assign("n_attn", 16);
  toml::table table = run_config_to_toml(a);
  table.insert_or_assign("model", model);
  const RunConfig grown = run_config_parse(test::plugins(), table, "a.toml");
  EXPECT_NE(config_identity(grown), config_identity(a));
  EXPECT_EQ(run_config_to_toml(grown)["model"]["n_attn"].value<std::int64_t>(), 16);
  // An integer is not a float, as TOML values.
  toml::table as_float = run_config_to_toml(a), as_int = as_float;
  as_float.insert_or_assign("x", 3.0);
  as_int.insert_or_assign("x", 3);
  EXPECT_NE(config_identity(as_float), config_identity(as_int));
}

// The choices are typed (issue 36): read once where the file is read, and printed back as the
// text they were written as.
TEST(Config, ChoicesAreTypedAndPrintBackAsWritten) {
  const std::string base = std::string(kTiny) + "[train]\nmax_steps = 3\n";
  const RunConfig plain = run_config_load(test::plugins(), write_temp("plain.toml", base));
  EXPECT_EQ(plain.data.task, Task::language_model);
  EXPECT_EQ(plain.train.precision, Precision::fp32);
  EXPECT_EQ(plain.train.nan_policy, NanPolicy::stop);
  EXPECT_EQ(plain.train.device, DeviceName{});
  const toml::table plain_toml = run_config_to_toml(plain);
  EXPECT_EQ(plain_toml["train"]["nan_policy"].value<std::string>(), "stop");
  EXPECT_FALSE(plain_toml["train"]["precision"]);  // the defaults fp32 and cpu are left out
  EXPECT_FALSE(plain_toml["train"]["device"]);
  const std::string choices = "precision = \"bf16\"\nnan_policy = \"skip\"\ndevice = \"cpu\"\n";
  const RunConfig chosen = run_config_load(test::plugins(), write_temp("chosen.toml", base + choices));
  EXPECT_EQ(chosen.train.precision, Precision::bf16);
  EXPECT_EQ(chosen.train.nan_policy, NanPolicy::skip);
  const toml::table chosen_toml = run_config_to_toml(chosen);
  EXPECT_EQ(chosen_toml["train"]["precision"].value<std::string>(), "bf16");
  EXPECT_EQ(chosen_toml["train"]["nan_policy"].value<std::string>(), "skip");
  EXPECT_FALSE(chosen_toml["train"]["device"]);
  // Devices as the config writes them; CUDA ones are refused on this machine before parsing.
  for (const char* text : {"cpu", "cuda", "cuda:0", "cuda:3", "cuda:12"}) {
    const std::optional<DeviceName> device = device_name_parse(text);
    ASSERT_TRUE(device) << text;
    EXPECT_EQ(device->text(), text);
  }
  EXPECT_EQ(device_name_parse("cuda:3")->index, 3);
  EXPECT_EQ(device_name_parse("cuda")->index, -1);
  for (const char* text : {"", "gpu", "CPU", "cuda:", "cuda:x", "cuda:01", "cuda:-1", "cuda:1 "}) {
    EXPECT_FALSE(device_name_parse(text)) << text;
  }
  EXPECT_EQ(task_parse("image_classification"), Task::image_classification);
  EXPECT_EQ(task_name(Task::language_model), kLanguageModelTask);
  EXPECT_FALSE(task_parse("regression"));
  EXPECT_EQ(nan_policy_parse("skip"), NanPolicy::skip);
  EXPECT_FALSE(nan_policy_parse("ignore"));
}

TEST(Config, MissingKeyAndUnknownFamily) {
  std::string text = kTiny;
  text.erase(text.find("vocab = 64"), 10);
  std::string message = usage_error([&] { test::config_from_text(text, "m.toml"); });
  EXPECT_NE(message.find("model.vocab: missing"), std::string::npos) << message;
  text = kTiny;
  text.replace(text.find("\"tokenformer\""), 13, "\"mamba\"");
  message = usage_error([&] { test::config_from_text(text, "f.toml"); });
  EXPECT_NE(message.find("f.toml:1:10: family: unknown model family 'mamba'"), std::string::npos) << message;
  EXPECT_NE(message.find("known families: tokenformer, transformer"), std::string::npos) << message;
}

TEST(Config, MissingFileAndSyntaxError) {
  std::string message = usage_error([] { model_config_load(test::plugins(), "/nonexistent/x.toml"); });
  EXPECT_NE(message.find("config file '/nonexistent/x.toml' not found"), std::string::npos) << message;
  std::string path = write_temp("syntax.toml", "family = \"tokenformer\"\n[model\nlayers = 2\n");
  message = usage_error([&] { model_config_load(test::plugins(), path); });
  EXPECT_NE(message.find(path + ":2:"), std::string::npos) << message;
  EXPECT_NE(message.find("TOML syntax error"), std::string::npos) << message;
}

TEST(Config, SetOverridesReplaceAndAddKeys) {
  std::string path = write_temp("tiny.toml", kTiny);
  ModelConfig config =
      model_config_load(test::plugins(), path, {"model.n_attn=12", "model.pattention.norm=softmax", "name=renamed"});
  EXPECT_EQ(config.name, "renamed");
  toml::table resolved = config.spec->to_toml();
  EXPECT_EQ(resolved["n_attn"].value<std::int64_t>(), 12);
  EXPECT_EQ(resolved["pattention"]["norm"].value<std::string>(), "softmax");

  std::string message = usage_error([&] { model_config_load(test::plugins(), path, {"model.layers=two"}); });
  EXPECT_NE(message.find("--set model.layers=two: model.layers: expected an integer, got a string"), std::string::npos)
      << message;
  message = usage_error([&] { model_config_load(test::plugins(), path, {"model.n_atn=3"}); });
  EXPECT_NE(message.find("--set model.n_atn=3: unknown key 'model.n_atn'"), std::string::npos) << message;
  message = usage_error([&] { model_config_load(test::plugins(), path, {"novalue"}); });
  EXPECT_NE(message.find("is not key=value"), std::string::npos) << message;
  message = usage_error([&] { model_config_load(test::plugins(), path, {"model.d.x=1"}); });
  EXPECT_NE(message.find("'model.d' is an integer, not a table"), std::string::npos) << message;
}

// [train]'s keys are declared once (engine/config/train_keys.h). A config that sets every key
// away from its default writes back exactly the list's keys, and reads back to the same
// config; each budget is written where it is the one set; and docs/configs.md documents
// every key. A key added to the reading but not to the writing (or the docs) fails here.
TEST(Config, EveryTrainKeyIsWrittenBackReadBackAndDocumented) {
  // train.device = "cuda" and train.tf32 are refused where there is no GPU: the text alone is
  // checked here, as in a process without LibTorch (engine/config/device_name.h).
  device_check_install(nullptr);
  struct Restore {
    ~Restore() { device_check_install(&device_problem); }
  } restore;
  const std::string every = std::string(kTiny) + R"(
[train]
seed = 7
batch_size = 3
grad_accum = 2
memory_limit_gb = 3.5
seq_len = 12
lr = 0.002
min_lr_ratio = 0.2
warmup_steps = 5
warmup_fraction = 0.05
beta1 = 0.8
beta2 = 0.9
eps = 1e-7
weight_decay = 0.01
grad_clip = 0.5
max_steps = 40
schedule_steps = 50
eval_every = 20
eval_batches = 2
checkpoint_every = 10
keep_checkpoints = 2
nan_policy = "skip"
log_every = 4
peak_flops = 1e12
precision = "bf16"
device = "cuda:1"
tf32 = true
[[train.growth]]
at_step = 20
method = "pattention_grow"
to = { n_attn = 12 }
[train.growth_repeat]
every_steps = 10
add_ffn = 4
[train.mask.blocks]
first = { attn = [0, 4] }
[train.mask]
use = ["first"]
)";
  const RunConfig config = run_config_load(test::plugins(), write_temp("every-key.toml", every));
  const toml::table written = train_to_toml(config.train);
  std::set<std::string> listed, keys;
  for (const TrainKey& key : train_keys()) listed.insert(key.name);
  for (const auto& [key, value] : written) keys.insert(std::string(key.str()));
  keys.insert({"max_tokens", "max_flops"});  // one budget at a time: these two are checked below
  EXPECT_EQ(keys, listed);
  EXPECT_EQ(listed.size(), train_keys().size());  // no key listed twice

  // Read back from what was written: the same config, byte for byte.
  std::ostringstream again;
  again << run_config_to_toml(config);
  const RunConfig reread = run_config_load(test::plugins(), write_temp("every-key-again.toml", again.str()));
  EXPECT_EQ(run_config_text(reread), run_config_text(config));
  EXPECT_EQ(reread.train.seed, 7u);
  EXPECT_EQ(reread.train.device.text(), "cuda:1");
  EXPECT_EQ(reread.train.growth_repeat.add_ffn, 4);

  // The two other budgets, each where it is the one set.
  for (const std::string budget : {"max_tokens = 1e6", "max_flops = 1e12"}) {
    const RunConfig other =
        run_config_load(test::plugins(), write_temp("budget.toml", std::string(kTiny) + "[train]\n" + budget + "\n"));
    const toml::table t = train_to_toml(other.train);
    EXPECT_TRUE(t.contains(budget.substr(0, budget.find(' ')))) << budget;
    EXPECT_FALSE(t.contains("max_steps")) << budget;
  }

  // docs/configs.md's [train] section names each key.
  std::ifstream docs(std::string(TFW_SOURCE_DIR) + "/docs/configs.md");
  const std::string text((std::istreambuf_iterator<char>(docs)), std::istreambuf_iterator<char>());
  const std::size_t begin = text.find("## `[train]`");
  ASSERT_NE(begin, std::string::npos);
  const std::string section = text.substr(begin, text.find("\n## ", begin + 1) - begin);
  for (const TrainKey& key : train_keys()) {
    const std::string name = key.name;
    EXPECT_TRUE(section.find("`" + name + "`") != std::string::npos ||
                section.find("train." + name + "]") != std::string::npos)
        << "docs/configs.md does not document train." << name;
  }
}

// [data]'s keys are declared once (engine/config/data_keys.h), each for its task. A config of
// each task that sets every one of its keys away from the default writes back exactly that
// task's keys and reads back to the same config; another task's key is refused as unknown;
// and docs/configs.md documents every key in the [data] section.
TEST(Config, EveryDataKeyIsWrittenBackReadBackAndDocumented) {
  const auto folder = std::filesystem::temp_directory_path() / "tfw-test-config" / "images";
  std::filesystem::create_directories(folder);
  const std::string text_every = std::string(kTiny) + R"(
[data]
corpus = "kjv"
tokenizer = "gpt2"
eval_corpora = ["gcide", "pydoc"]
)";
  const std::string image_every = R"(family = "vit"
[model]
layers = 1
d = 8
heads = 2
d_ffn = 8
[data]
dataset = "images"
validation = "tuning"
tuning_size = 500
crop_pad = 2
flip = true
)";
  for (const auto& [task, text] :
       {std::pair{Task::language_model, text_every}, {Task::image_classification, image_every}}) {
    SCOPED_TRACE(text);
    const RunConfig config = run_config_load(test::plugins(), write_temp("every-data-key.toml", text));
    ASSERT_EQ(config.data.task, task);
    std::set<std::string> listed, written;
    for (const DataKey& key : data_keys()) {
      if (key.task == task) listed.insert(key.name);
    }
    for (const auto& [key, value] : data_to_toml(config.data)) written.insert(std::string(key.str()));
    EXPECT_EQ(written, listed);

    std::ostringstream again;
    again << run_config_to_toml(config);
    const RunConfig reread = run_config_load(test::plugins(), write_temp("every-data-key-again.toml", again.str()));
    EXPECT_EQ(run_config_text(reread), run_config_text(config));
  }
  const RunConfig text_config = run_config_load(test::plugins(), write_temp("every-data-key.toml", text_every));
  EXPECT_EQ(text_config.data.corpus, "kjv");
  EXPECT_EQ(text_config.data.tokenizer, "gpt2");
  EXPECT_EQ(text_config.data.eval_corpora, (std::vector<std::string>{"gcide", "pydoc"}));
  const RunConfig image_config = run_config_load(test::plugins(), write_temp("every-data-key.toml", image_every));
  EXPECT_EQ(image_config.data.image.dataset, std::filesystem::absolute(folder).lexically_normal().string());
  EXPECT_EQ(image_config.data.image.validation, "tuning");
  EXPECT_EQ(image_config.data.image.tuning_size, 500);
  EXPECT_EQ(image_config.data.image.crop_pad, 2);
  EXPECT_TRUE(image_config.data.image.flip);

  // A key of the other task's [data] is unknown here.
  const std::string message = usage_error([&] {
    run_config_load(test::plugins(), write_temp("other-task.toml", std::string(kTiny) + "[data]\nflip = true\n"));
  });
  EXPECT_NE(message.find("flip"), std::string::npos) << message;

  std::set<std::string> names;
  for (const DataKey& key : data_keys()) names.insert(key.name);
  EXPECT_EQ(names.size(), data_keys().size());  // no key listed twice
  std::ifstream docs(std::string(TFW_SOURCE_DIR) + "/docs/configs.md");
  const std::string docs_text((std::istreambuf_iterator<char>(docs)), std::istreambuf_iterator<char>());
  const std::size_t begin = docs_text.find("## `[data]`");
  ASSERT_NE(begin, std::string::npos);
  const std::string section = docs_text.substr(begin, docs_text.find("\n## ", begin + 1) - begin);
  for (const DataKey& key : data_keys()) {
    EXPECT_NE(section.find("| `" + std::string(key.name) + "` |"), std::string::npos)
        << "docs/configs.md does not document data." << key.name;
  }
}

}  // namespace test_config
}  // namespace tfw
