// Importing official TokenFormer releases (engine/interop/import.h): a small random checkpoint in the
// official layout and file format, written by tests/reference/tokenformer_official.py with the
// logits of an independent float64 implementation of the official forward pass, imported and
// run by the workbench's model; the PyTorch pickle reader on the cases a state dict can hold;
// and the importer's errors.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "engine/checkpoint/checkpoint.h"
#include "engine/data/shards.h"
#include "engine/data/tokenizer.h"
#include "engine/core/error.h"
#include "engine/interop/import.h"
#include "engine/interop/neox_config.h"
#include "engine/interop/torch_pickle.h"
#include "tests/cli/run_command.h"
#include "tests/cli/trained_once.h"
#include "tests/support.h"

namespace tfw {
namespace test_import {

namespace fs = std::filesystem;

// GPT-2's tokenizer.json, written by tests/reference/gpt2_tokenizer_json.py (about 1 s of
// Python, which every release of these tests paid again) once per build and script
// (tests/cli/trained_once.h), copied to `to`.
void copy_gpt2_tokenizer_json(const fs::path& to) {
  const std::string script = std::string(TFW_SOURCE_DIR) + "/tests/reference/gpt2_tokenizer_json.py";
  const char* gpt2_dir = std::getenv("TFW_GPT2_DIR");
  ASSERT_NE(gpt2_dir, nullptr);
  const auto edited = fs::last_write_time(script).time_since_epoch().count();
  const fs::path scratch = to.parent_path() / ".gpt2-tokenizer";
  ASSERT_EQ(test::trained_home("# the script as of " + std::to_string(edited) + "\n" + TFW_PYTHON + " " + script + " " +
                                   gpt2_dir + " $H/tokenizer.json",
                               scratch.string()),
            "");
  fs::copy_file(scratch / "tokenizer.json", to, fs::copy_options::overwrite_existing);
  fs::remove_all(scratch);
}

struct ReleaseCase {
  const char* name;
  const char* flags;
};

// Three variants cover what the importer maps: both key layouts (pipeline and sequential),
// the three official score norms, parameter-free and affine block norms, a parameter-free
// final norm, a saved copy of the tied head, and rotary widths of 2, 4 and 8 channels. (With
// softmax, the keys are smaller: sharp scores make float32 itself 5e-3 off float64.)
const ReleaseCase kReleases[] = {
    {"pipe-l2", ""},
    {"sequential-gelu-l2",
     "--layout sequential --activation gelu_l2_norm --norm layernorm --final-norm "
     "layernorm_nonparam --head-copy --rotary-pct 0.5 --heads 2 --seed 1"},
    {"pipe-softmax", "--activation softmax --heads 1 --layers 3 --qkv 16 --ffn 40 --seed 2 --key-std 0.15"},
};
// Releases that must be refused: a tensor missing, one too many, an untied head.
const ReleaseCase kBadReleases[] = {
    {"drop", "--drop 3.attention.key.value_param_tokens"},
    {"extra", "--extra 2.attention.dense.weight"},
    {"untied", "--untied"},
};

// Torch writes the files these tests read: the releases above (each with GPT-2's
// tokenizer.json), the crafted and hostile pickles, a state dict of every dtype, and a weights
// file in the legacy format. One Python process writes them all, once per process of this
// suite (tests/reference/run_many.py): each Python start imports PyTorch, about 2 s, and the
// suite once started twelve. Each test works on a copy of what it changes.
const char* const kStateScript =
    "import sys, torch, collections\n"
    "base = torch.arange(24, dtype=torch.float32).reshape(4, 6)\n"
    "sd = collections.OrderedDict()\n"
    "sd['plain'] = base\n"
    "sd['transposed'] = base.t()\n"
    "sd['row'] = base[2]\n"
    "sd['half'] = torch.tensor([1.5, -2.25], dtype=torch.float16)\n"
    "sd['bf16'] = torch.tensor([3.0, 0.5], dtype=torch.bfloat16)\n"
    "sd['double'] = torch.tensor([[1e-300, 2.0]], dtype=torch.float64)\n"
    "sd['long'] = torch.tensor([-7, 2**40])\n"
    "sd['scalar'] = torch.tensor(4.0)\n"
    "sd._metadata = {'': {'version': 1}}\n"
    "torch.save({'module': sd, 'iteration': 7, 'args': {'lr': 0.1, 'name': 'x', 'flag': True, 'none': None}}, "
    "sys.argv[1])\n";
const char* const kLegacyScript =
    "import sys, torch\n"
    "torch.save({'a': torch.zeros(2)}, sys.argv[1], _use_new_zipfile_serialization=False)\n";
// The oversized storages: NUMEL floats claimed over a 128-byte record, SIZE of them viewed.
struct Oversized {
  const char* file;
  const char* numel;
  int size;
};
const Oversized kOversized[] = {{"good.pt", "32", 32}, {"huge.pt", "4611686018427387936", 64}, {"short.pt", "33", 33}};

struct Prepared {
  fs::path dir;
  std::string error;  // "" when every file was written
  ~Prepared() {
    std::error_code ignored;
    if (!dir.empty()) fs::remove_all(dir, ignored);
  }
};

void prepare(Prepared& p) {
  p.dir = fs::temp_directory_path() / ("tfw-test-import-" + std::to_string(::getpid()));
  fs::remove_all(p.dir);
  fs::create_directories(p.dir);
  const std::string reference = std::string(TFW_SOURCE_DIR) + "/tests/reference/";
  std::string command = std::string(TFW_PYTHON) + " " + reference + "run_many.py";
  auto job = [&](const std::string& arguments) { command += " :: " + arguments; };
  copy_gpt2_tokenizer_json(p.dir / "tokenizer.json");
  for (const auto* cases : {&kReleases, &kBadReleases}) {
    for (const ReleaseCase& c : *cases) {
      const fs::path dir = p.dir / c.name;
      fs::create_directories(dir);
      fs::copy_file(p.dir / "tokenizer.json", dir / "tokenizer.json");
      job(reference + "tokenformer_official.py " + dir.string() + " " + c.flags);
    }
  }
  fs::create_directories(p.dir / "oversized");
  for (const Oversized& o : kOversized) {
    job(reference + "oversized_storage.py " + (p.dir / "oversized" / o.file).string() + " " + o.numel + " " +
        std::to_string(o.size));
  }
  job(reference + "hostile_pickles.py " + (p.dir / "hostile").string());
  std::ofstream(p.dir / "state.py") << kStateScript;
  job((p.dir / "state.py").string() + " " + (p.dir / "state.pt").string());
  std::ofstream(p.dir / "legacy.py") << kLegacyScript;
  job((p.dir / "legacy.py").string() + " " + (p.dir / "legacy.bin").string());
  const test::Result ran = test::capture(command);
  if (ran.code != 0) p.error = "`" + command + "` exited " + std::to_string(ran.code) + ":\n" + ran.output;
}

const Prepared& prepared() {
  static Prepared p;
  [[maybe_unused]] static const bool once = (prepare(p), true);
  return p;
}

// A copy of the prepared release `variant` in its own folder, for a test to change.
std::string release(const std::string& variant, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tfw-test-import-" + name);
  fs::remove_all(dir);
  fs::copy(prepared().dir / variant, dir, fs::copy_options::recursive);
  return dir.string();
}

std::shared_ptr<Model> load_imported(const std::string& checkpoint) {
  const CheckpointMeta meta = checkpoint_read_meta(checkpoint);
  RunConfig config = run_config_parse(test::plugins(), toml::parse(meta.config_toml), checkpoint);
  auto model = test::plugins().family(config.model.family).build(*config.model.spec, 3);
  checkpoint_load(checkpoint, *model, nullptr);
  return model;
}

struct Expected {
  torch::Tensor ids, logits;
};

Expected read_expected(const std::string& dir) {
  nlohmann::json meta = nlohmann::json::parse(std::ifstream(dir + "/expected.json"));
  std::vector<std::int64_t> ids = meta["ids"].get<std::vector<std::int64_t>>();
  std::vector<std::int64_t> shape = meta["shape"].get<std::vector<std::int64_t>>();
  std::ifstream in(dir + "/expected_logits.f64", std::ios::binary);
  std::vector<double> values(static_cast<std::size_t>(shape[0] * shape[1]));
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(double)));
  EXPECT_TRUE(in.good());
  Expected e;
  e.ids = torch::tensor(ids, torch::kInt64).unsqueeze(0);
  e.logits = torch::from_blob(values.data(), shape, torch::kFloat64).clone();
  return e;
}

// The imported model computes the official forward pass's logits within 1e-5 (fp32 against
// float64), read back from the checkpoint the importer wrote.
TEST(Import, OfficialLayoutGivesTheOfficialLogits) {
  ASSERT_EQ(prepared().error, "");
  for (const ReleaseCase& c : kReleases) {
    SCOPED_TRACE(c.name);
    const std::string dir = release(c.name, c.name);
    ImportRequest request;
    request.dir = dir;
    request.out_dir = dir + "/imported";
    const ImportResult result = import_tokenformer(test::plugins(), request);
    EXPECT_TRUE(fs::exists(result.checkpoint));
    EXPECT_TRUE(fs::exists(result.tokenizer));
    auto model = load_imported(result.checkpoint);
    model->eval();
    torch::NoGradGuard no_grad;
    const Expected e = read_expected(dir);
    const torch::Tensor logits = model->forward(e.ids).squeeze(0).to(torch::kFloat64);
    ASSERT_EQ(logits.sizes(), e.logits.sizes());
    const double diff = test::max_abs_diff(logits, e.logits);
    EXPECT_LT(diff, 1e-5) << "largest logit " << e.logits.abs().max().item<double>();
    std::cout << c.name << ": max |logit difference| " << diff << " (logits up to "
              << e.logits.abs().max().item<double>() << ")\n";
    // Not trivially equal: the logits spread over several units.
    EXPECT_GT(e.logits.std().item<double>(), 0.5);
    // Its tokenizer is the release's: GPT-2's ids for a known string.
    const RunConfig config = run_config_load(test::plugins(), result.config);
    EXPECT_EQ(config.data.tokenizer, fs::path(result.tokenizer).lexically_normal().string());
    EXPECT_EQ(config.model.spec->parameter_count(), result.parameters);
  }
}

// Issue 33, finding 5: a storage claiming 2^62 + 32 floats over a 128-byte record made
// numel * 4 wrap to 128, and a tensor of 64 of them read past the record. Refused, naming it.
TEST(Import, AStorageLongerThanItsRecordIsRefused) {
  ASSERT_EQ(prepared().error, "");
  const fs::path dir = prepared().dir / "oversized";
  const auto good = torch_state_dict_read((dir / kOversized[0].file).string());  // the same file, honest: read
  ASSERT_EQ(good.size(), 1u);
  EXPECT_EQ(good[0].second.numel(), 32);
  for (const Oversized& bad : {kOversized[1], kOversized[2]}) {
    try {
      torch_state_dict_read((dir / bad.file).string());
      ADD_FAILURE() << bad.numel << " floats over 128 bytes were accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(
          std::string(e.what()).find(std::string("storage 0 holds 128 bytes, fewer than ") + bad.numel + " elements"),
          std::string::npos)
          << e.what();
    }
  }
}

// Issue 33: lists nested 100,000 deep crashed the reader's destructors (recursion); a dict of
// 200,000 keys took over a minute (a linear scan per key); a stride-0 view of one float
// materialised 2^28 of them (1 GiB) before any shape was checked.
TEST(Import, HostilePicklesAreReadWithinBounds) {
  ASSERT_EQ(prepared().error, "");
  const fs::path dir = prepared().dir / "hostile";
  auto error_of = [&](const std::string& name) -> std::string {
    try {
      torch_state_dict_read((dir / name).string());
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of("deep.pt").find("holds no state dict"), std::string::npos) << error_of("deep.pt");
  const auto start = std::chrono::steady_clock::now();
  const auto tensors = torch_state_dict_read((dir / "keys.pt").string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].first, "w");
  EXPECT_EQ(tensors[0].second[3].item<float>(), 3.0f);
  EXPECT_LT(seconds, 10.0) << "200,000 dict keys took " << seconds << " s";
  EXPECT_NE(error_of("stride0.pt").find("a tensor of 268435456 elements over a storage of 1"), std::string::npos)
      << error_of("stride0.pt");
  // Issue 50: `checkpoints upgrade` flattened shared.pt's 2^40 names until 10 GB and bad_alloc.
  const auto shared_start = std::chrono::steady_clock::now();
  std::string shared_error = "no error";
  try {
    torch_archive_flatten((dir / "shared.pt").string());
  } catch (const UsageError& e) {
    shared_error = e.what();
  }
  const double shared_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - shared_start).count();
  EXPECT_LT(fs::file_size(dir / "shared.pt"), 8192u);
  EXPECT_NE(shared_error.find("holds more than 2097152 values, counting a shared one each time it is named"),
            std::string::npos)
      << shared_error;
  EXPECT_LT(shared_seconds, 30.0) << "refused after " << shared_seconds << " s";
  // Issue 50: a deflated data.pkl declaring more than it may hold is refused before inflating.
  EXPECT_LT(fs::file_size(dir / "bomb.pt"), 1u << 20);
  // (Its zip directory is read first: 100 MiB is more than 4 times the file, 1 MiB added.)
  EXPECT_NE(error_of("bomb.pt").find("its record archive/data.pkl declares 104857602 bytes inflated, more than the"),
            std::string::npos)
      << error_of("bomb.pt");
  // Found by the fuzzer: LibTorch's reader inflates the `version` record as it opens the file,
  // into a buffer of its declared size (2 GiB here). The zip's directory is checked first.
  EXPECT_NE(error_of("version-bomb.pt")
                .find("its record archive/version declares 2147483650 bytes inflated, more than "
                      "the"),
            std::string::npos)
      << error_of("version-bomb.pt");
}

// The pickle reader keeps values, dtypes, views into a shared storage, non-contiguous strides
// and storage offsets; a dict holding a state dict under "module" is found.
TEST(Import, PickleReaderReadsWhatTorchSaveWrites) {
  ASSERT_EQ(prepared().error, "");
  const std::string file = (prepared().dir / "state.pt").string();  // written by kStateScript
  const auto tensors = torch_state_dict_read(file);
  ASSERT_EQ(tensors.size(), 8u);
  std::map<std::string, torch::Tensor> t(tensors.begin(), tensors.end());
  EXPECT_EQ(tensors[0].first, "plain");
  const torch::Tensor base = torch::arange(24, torch::kFloat32).reshape({4, 6});
  EXPECT_TRUE(torch::equal(t["plain"], base));
  EXPECT_TRUE(torch::equal(t["transposed"], base.t()));
  EXPECT_TRUE(t["transposed"].is_contiguous());
  EXPECT_TRUE(torch::equal(t["row"], base[2]));
  EXPECT_EQ(t["half"].scalar_type(), torch::kHalf);
  EXPECT_EQ(t["half"].to(torch::kFloat32)[1].item<float>(), -2.25f);
  EXPECT_EQ(t["bf16"].scalar_type(), torch::kBFloat16);
  EXPECT_EQ(t["bf16"].to(torch::kFloat32)[0].item<float>(), 3.0f);
  EXPECT_EQ(t["double"][0][0].item<double>(), 1e-300);
  EXPECT_EQ(t["long"][1].item<std::int64_t>(), std::int64_t{1} << 40);
  EXPECT_EQ(t["long"][0].item<std::int64_t>(), -7);
  EXPECT_EQ(t["scalar"].dim(), 0);
  EXPECT_EQ(t["scalar"].item<float>(), 4.0f);
}

std::string import_error(const std::string& dir, const std::vector<std::string>& configs = {}) {
  ImportRequest request;
  request.dir = dir;
  request.configs = configs;
  request.out_dir = dir + "/imported";
  try {
    import_tokenformer(test::plugins(), request);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

// Bad releases are errors that name the problem: a missing, an unexpected or an untied tensor,
// a config of another shape or an unsupported setting, a truncated or legacy weights file, no
// config, no tokenizer.
TEST(Import, BadReleasesAreClearErrors) {
  ASSERT_EQ(prepared().error, "");
  std::string dir = release("drop", "drop");
  EXPECT_NE(import_error(dir).find("3.attention.key.value_param_tokens is missing"), std::string::npos)
      << import_error(dir);
  dir = release("extra", "extra");
  EXPECT_NE(import_error(dir).find("the config's model does not have: 2.attention.dense.weight"), std::string::npos)
      << import_error(dir);
  dir = release("untied", "untied");
  EXPECT_NE(import_error(dir).find("the model is untied"), std::string::npos) << import_error(dir);

  dir = release("pipe-l2", "config");
  const std::string original = dir + "/model_eval.yml";
  std::string text;
  {
    std::ifstream in(original);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto variant = [&](const std::string& from, const std::string& to) {
    std::string changed = text;
    const std::size_t at = changed.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    changed.replace(at, from.size(), to);
    const std::string path = dir + "/variant.yaml.txt";
    std::ofstream(path) << changed;
    return import_error(dir, {path});
  };
  EXPECT_NE(variant("\"num_layers\": 2", "\"num_layers\": 3").find("num_layers = 3, but the weights"),
            std::string::npos);
  EXPECT_NE(variant("\"num_layers\": 2", "\"num_layers\": 1").find("hold 2 layers"), std::string::npos);
  EXPECT_NE(variant("\"norm\": \"layernorm_nonparam\"", "\"norm\": \"layernorm\"")
                .find("are missing: 2.input_layernorm.weight"),
            std::string::npos);
  EXPECT_NE(variant("\"norm\": \"layernorm_nonparam\"", "\"norm\": \"rmsnorm\"").find("only LayerNorms"),
            std::string::npos);
  EXPECT_NE(variant("\"qkv_slot_num\": 24", "\"qkv_slot_num\": 25").find("differs from qkv_slot_num"),
            std::string::npos);
  EXPECT_NE(variant("\"qkv_slot_num\": 24", "\"qkv_slot_num\": 25").find("proj_slot_num"), std::string::npos);
  EXPECT_NE(variant("\"hidden_size\": 32", "\"hidden_size\": 32 32").find("not a NeoX config"), std::string::npos);
  EXPECT_NE(variant("\"norm_activation_type\": \"l2_norm_gelu\"", "\"norm_activation_type\": \"relu\"")
                .find("norm_activation_type"),
            std::string::npos);
  // Issue 33: an attention_config nested 200,000 deep overflowed the stack when printed.
  EXPECT_NE(variant("\"num_layers\": 2",
                    "\"num_layers\": 2, \"attention_config\": " + std::string(200000, '[') + std::string(200000, ']'))
                .find("nests deeper than 32 levels"),
            std::string::npos);
  // Issue 50: a config of 3 million objects parsed for over a minute; the count refuses it as
  // it is parsed.
  {
    std::string objects = "{\"x\": [";
    for (int i = 0; i < 3000000; ++i) objects += "{},";
    objects += "{}]}";
    const auto start = std::chrono::steady_clock::now();
    std::string error = "no error";
    try {
      neox_config_parse(objects, "objects.json");
    } catch (const UsageError& e) {
      error = e.what();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(error.find("config objects.json: holds more than 65536 objects and arrays: not a NeoX config"),
              std::string::npos)
        << error.substr(0, 300);
    EXPECT_LT(seconds, 20.0) << "3 million objects took " << seconds << " s";
  }
  // Issue 33: a failed import left model.toml (and the tokenizer's copy) in --out. The weights
  // here do not fit the config, which is found after the config was written.
  fs::remove_all(dir + "/imported");
  {
    std::string both = text;
    for (const char* key : {"\"qkv_slot_num\": 24", "\"proj_slot_num\": 24"}) {
      const std::size_t at = both.find(key);
      ASSERT_NE(at, std::string::npos) << key;
      both.replace(at + std::string(key).size() - 2, 2, "48");
    }
    std::ofstream(dir + "/variant.yaml.txt") << both;
    const std::string error = import_error(dir, {dir + "/variant.yaml.txt"});
    EXPECT_NE(error.find("the config's model needs"), std::string::npos) << error;
  }
  EXPECT_FALSE(fs::exists(dir + "/imported")) << "a failed import left files in --out";
  fs::rename(original, dir + "/elsewhere.txt");
  EXPECT_NE(import_error(dir).find("no config in"), std::string::npos) << import_error(dir);
  fs::rename(dir + "/elsewhere.txt", original);

  // A truncated weights file, then the legacy (pre-1.6) format.
  const std::string weights = dir + "/pytorch_model.bin";
  const auto size = fs::file_size(weights);
  fs::resize_file(weights, size / 2);
  EXPECT_NE(import_error(dir).find("corrupt or truncated"), std::string::npos) << import_error(dir);
  fs::copy_file(prepared().dir / "legacy.bin", weights, fs::copy_options::overwrite_existing);  // kLegacyScript's
  EXPECT_NE(import_error(dir).find("legacy"), std::string::npos) << import_error(dir);
  fs::remove(dir + "/tokenizer.json");
  EXPECT_NE(import_error(dir).find("no tokenizer.json"), std::string::npos) << import_error(dir);
}

// data.tokenizer names a tokenizer.json by path, relative to the config file's folder and kept
// absolute; prepared shards are labelled by the file's CRC-32, so that copies share them; a
// missing file or an unknown name is a config error.
TEST(Import, TokenizerJsonInRunConfigs) {
  const fs::path dir = fs::temp_directory_path() / "tfw-test-tokenizer-config";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  ASSERT_NO_FATAL_FAILURE(copy_gpt2_tokenizer_json(dir / "sub/tok.json"));
  fs::copy_file(dir / "sub/tok.json", dir / "copy.json");
  auto write = [&](const std::string& tokenizer) {
    std::ofstream(dir / "run.toml") << "family = \"tokenformer\"\n[model]\nlayers = 1\nd = 16\nheads = 2\nn_attn = 4\n"
                                       "n_ffn = 8\nvocab = 50304\n[data]\ntokenizer = \""
                                    << tokenizer << "\"\n[train]\nmax_steps = 1\n";
    return (dir / "run.toml").string();
  };
  const RunConfig config = run_config_load(test::plugins(), write("sub/tok.json"));
  EXPECT_EQ(config.data.tokenizer, (dir / "sub/tok.json").string());
  const std::string label = tokenizer_label(config.data.tokenizer);
  EXPECT_EQ(label.rfind("json-", 0), 0u);
  EXPECT_EQ(label.size(), 13u);
  EXPECT_EQ(tokenizer_label((dir / "copy.json").string()), label);
  EXPECT_EQ(tokenizer_create(config.data.tokenizer)->name(), label);
  EXPECT_EQ(data_prepared_dir("jargon", config.data.tokenizer, "/h/data"), "/h/data/jargon-" + label);
  auto error_of = [&](const std::string& tokenizer) -> std::string {
    try {
      run_config_load(test::plugins(), write(tokenizer));
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of("missing.json").find("no such tokenizer.json"), std::string::npos) << error_of("missing.json");
  EXPECT_NE(error_of("gpt3").find("unknown tokenizer 'gpt3'"), std::string::npos) << error_of("gpt3");
}

// From the command line: `tfw import tokenformer` writes the checkpoint; `tfw eval`, `tfw
// attention` and `tfw sample` then work on it with the release's tokenizer (the logits
// themselves are checked above); bad input exits 2 with the reason.
TEST(Import, CommandLineImportThenEvalAttentionSample) {
  ASSERT_EQ(prepared().error, "");
  const std::string dir = release("pipe-l2", "cli");
  const std::string home = dir + "/home", out = dir + "/imported";
  auto tfw = [&](const std::string& arguments) {
    return test::capture("TFW_FIXED_THREADS=1 " TFW_BINARY " " + arguments + " --home " + home);
  };
  test::Result imported = test::capture(TFW_BINARY " import tokenformer " + dir + " --out " + out + " --json", false);
  ASSERT_EQ(imported.code, 0) << imported.output;
  const nlohmann::json result = nlohmann::json::parse(imported.out);
  const std::string checkpoint = result["checkpoint"];
  EXPECT_EQ(result["parameters"], 50304 * 32 + 2 * 2 * 32 * (4 * 24 + 48) + 2 * 32);
  EXPECT_EQ(result["tensors"], 23);

  test::Result evaluated = tfw("eval " + checkpoint + " --corpus jargon --windows 2 --json");
  ASSERT_EQ(evaluated.code, 0) << evaluated.output;
  const nlohmann::json eval = nlohmann::json::parse(evaluated.out.substr(evaluated.out.find('{')));
  const double loss = eval["results"][0]["loss"].get<double>();
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0);
  EXPECT_EQ(eval["results"][0]["tokens"], 2 * 64);  // windows of the config's seq_length
  EXPECT_EQ(eval["tokenizer"].get<std::string>(), out + "/tokenizer.json");

  test::Result attention = tfw("attention " + checkpoint + " --text \"Hello world, this is a test\"");
  ASSERT_EQ(attention.code, 0) << attention.output;
  EXPECT_NE(attention.output.find("' world'"), std::string::npos) << attention.output;  // GPT-2's tokens
  test::Result sampled = tfw("sample " + checkpoint + " --prompt Hello --tokens 5 --seed 1");
  ASSERT_EQ(sampled.code, 0) << sampled.output;
  EXPECT_EQ(sampled.output.rfind("Hello", 0), 0u) << sampled.output;

  test::Result bad = test::capture(TFW_BINARY " import tokenformer " + dir + "/nowhere --out " + out);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("no such release folder"), std::string::npos) << bad.output;
}

}  // namespace test_import
}  // namespace tfw
