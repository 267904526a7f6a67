// `tfw eval` end to end: the real binary against the trainer's own validation loss, strided
// windows against even ones over the same text, the store's evaluations table, and bad input.
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/machine/device.h"
#include "tests/cli/run_command.h"
#include "tests/cli/trained_once.h"

namespace test_eval {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;
using tfw::test::trainer_val_loss;

// Per process (ctest runs tests two at a time, each setting the suite up).
const std::string kHome = "/tmp/tfw-test-eval-" + std::to_string(::getpid());
const std::string kTiny = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";

Result tfw(const std::string& arguments, const std::string& environment = "") {
  return capture("TFW_FIXED_THREADS=1 " + environment + " " TFW_BINARY " " + arguments + " --home " + kHome);
}

nlohmann::json json_of(const Result& result) {
  return nlohmann::json::parse(result.out.substr(result.out.find("{\n")));
}

// A folder of prepared shards (nanoGPT layout, uint16) whose validation text is the first
// `val_tokens` tokens of kjv's, and whose training text is all of kjv's.
std::string shards_from_kjv(const std::string& name, std::size_t val_tokens) {
  const std::string dir = kHome + "/" + name;
  fs::create_directories(dir);
  fs::copy_file(kHome + "/data/kjv-byte/train.bin", dir + "/train.bin", fs::copy_options::overwrite_existing);
  std::ifstream in(kHome + "/data/kjv-byte/val.bin", std::ios::binary);
  std::vector<char> bytes(val_tokens * 2);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::ofstream(dir + "/val.bin", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return dir;
}

class Eval : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { fs::remove_all(kHome); }
  static void SetUpTestSuite() {
    // Trained once per suite run (tests/cli/trained_once.h), copied for this process.
    const std::string failure = tfw::test::trained_home(
        TFW_BINARY " train " + kTiny + " --set train.max_steps=60 --set train.eval_every=60 --home $H", kHome);
    ASSERT_EQ(failure, "");
  }
};

TEST_F(Eval, EqualsTheTrainersValidationLossOnTheSameWindows) {
  const Result eval = tfw("eval tiny-train-tokenformer --json");
  ASSERT_EQ(eval.code, 0) << eval.output;
  const nlohmann::json report = json_of(eval);
  EXPECT_EQ(report["step"], 60);
  ASSERT_EQ(report["results"].size(), 1u);
  const nlohmann::json& kjv = report["results"][0];
  EXPECT_EQ(kjv["corpus"], "kjv");
  EXPECT_EQ(kjv["windows"], 16 * 8);  // train.batch_size x train.eval_batches, as the trainer reads
  EXPECT_EQ(kjv["tokens"], 16 * 8 * 64);
  const double loss = kjv["loss"].get<double>();
  EXPECT_NEAR(loss, trainer_val_loss(kHome + "/runs/tiny-train-tokenformer"), 1e-6);
  EXPECT_NEAR(kjv["bits_per_token"].get<double>(), loss / std::log(2.0), 1e-12);
  EXPECT_NEAR(kjv["bits_per_byte"].get<double>(), loss / std::log(2.0), 1e-9);  // one byte a token
  EXPECT_NEAR(kjv["perplexity"].get<double>(), std::exp(loss), 1e-9);
  // Kept in the store under the run, and shown by `tfw runs show`.
  const Result shown = tfw("runs show tiny-train-tokenformer --json");
  ASSERT_EQ(shown.code, 0) << shown.output;
  bool found = false;
  const nlohmann::json record = json_of(shown);  // bound: a range-for over a temporary's member dangles
  for (const auto& e : record["evaluations"]) {
    if (e["metric"] == "loss" && e["corpus"] == "kjv") {
      found = true;
      EXPECT_DOUBLE_EQ(e["value"].get<double>(), loss);
      EXPECT_EQ(e["mode"], "even");
      EXPECT_EQ(e["step"], 60);
    }
  }
  EXPECT_TRUE(found) << shown.output;
}

// --device (issue 35): checkpoints are device-free, and evaluation may run elsewhere than the
// run trained. Here: the CPU gives the trainer's loss; CUDA on a machine without a device is
// a clear error that points at --device cpu (a GPU run's checkpoint on a laptop).
TEST_F(Eval, DeviceChoosesWhereItRunsAndAMissingGpuIsAClearError) {
  const Result cpu = tfw("eval tiny-train-tokenformer --device cpu --json --no-record");
  ASSERT_EQ(cpu.code, 0) << cpu.output;
  EXPECT_NEAR(json_of(cpu)["results"][0]["loss"].get<double>(),
              trainer_val_loss(kHome + "/runs/tiny-train-tokenformer"), 1e-6);
  const Result bad = tfw("eval tiny-train-tokenformer --device tpu --no-record");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("\"tpu\" is not a device"), std::string::npos) << bad.output;
  if (!tfw::cuda_available()) {
    const Result cuda = tfw("eval tiny-train-tokenformer --device cuda --no-record");
    EXPECT_EQ(cuda.code, 2) << cuda.output;
    EXPECT_NE(cuda.output.find("there is no CUDA device on this machine"), std::string::npos) << cuda.output;
    EXPECT_NE(cuda.output.find("--device cpu"), std::string::npos) << cuda.output;
  }
}

TEST_F(Eval, StridedWindowsOfOneWindowLengthAreTheEvenWindowsTheyCoincideWith) {
  // 1 + 8 x 64 validation tokens: 8 even windows start at 0, 64, ..., 448, exactly the
  // windows --stride 64 reads; every target is scored once either way.
  const std::string dir = shards_from_kjv("exact", 1 + 8 * 64);
  const Result even = tfw("eval tiny-train-tokenformer --json --no-record --corpus " + dir + " --windows 8");
  const Result strided = tfw("eval tiny-train-tokenformer --json --no-record --corpus " + dir + " --stride 64");
  ASSERT_EQ(even.code, 0) << even.output;
  ASSERT_EQ(strided.code, 0) << strided.output;
  const nlohmann::json a = json_of(even)["results"][0], b = json_of(strided)["results"][0];
  EXPECT_EQ(b["mode"], "stride:64");
  EXPECT_EQ(a["tokens"], 8 * 64);
  EXPECT_EQ(b["tokens"], 8 * 64);
  EXPECT_EQ(b["windows"], 8);
  EXPECT_NEAR(a["loss"].get<double>(), b["loss"].get<double>(), 1e-6);
  // A stride of 16 scores the same 512 targets, in 29 windows (25 at 0, 16, ..., 384 and the
  // rest to the end: 400, 416, 432, 448) with more context for most targets.
  const Result overlapping = tfw("eval tiny-train-tokenformer --json --no-record --corpus " + dir + " --stride 16");
  ASSERT_EQ(overlapping.code, 0) << overlapping.output;
  const nlohmann::json c = json_of(overlapping)["results"][0];
  EXPECT_EQ(c["tokens"], 8 * 64);
  EXPECT_EQ(c["windows"], 29);
}

TEST_F(Eval, ClozeScoresEveryPassageOfTheListItWrites) {
  const std::string list = kHome + "/cloze.tsv";
  const Result eval = tfw("eval tiny-train-tokenformer --json --cloze --cloze-passages 20 --cloze-list " + list);
  ASSERT_EQ(eval.code, 0) << eval.output;
  const nlohmann::json cloze = json_of(eval)["results"][0]["cloze"];
  EXPECT_EQ(cloze["passages"], 20);
  EXPECT_GE(cloze["correct"].get<int>(), 0);
  EXPECT_NEAR(cloze["accuracy"].get<double>(), cloze["correct"].get<double>() / 20, 1e-12);
  EXPECT_LT(cloze["mean_logprob"].get<double>(), 0);
  // The list: a header and 20 passages, each target named in its context.
  std::ifstream in(list);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("# cloze passages of kjv (byte tokens, window 64)", 0), 0u) << line;
  int passages = 0;
  while (std::getline(in, line)) {
    passages += 1;
    const std::size_t a = line.find('\t'), b = line.find('\t', a + 1), c = line.find('\t', b + 1);
    const std::string word = line.substr(b + 1, c - b - 1), context = line.substr(c + 1);
    EXPECT_GE(word.size(), 4u) << line;
    auto lower = [](std::string text) {
      for (char& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return text;
    };
    EXPECT_NE(lower(context).find(lower(word)), std::string::npos) << line;  // named before
  }
  EXPECT_EQ(passages, 20);
  const std::string stored = capture("sqlite3 " + kHome +
                                     "/runs.db \"SELECT windows FROM evaluations WHERE metric = "
                                     "'cloze_accuracy' ORDER BY id DESC LIMIT 1\"")
                                 .out;
  EXPECT_EQ(stored, "20\n");
}

// The two held-out corpora (Debian's jargon-text and fortunes) read, prepare and evaluate.
TEST_F(Eval, TheHeldOutCorporaEvaluate) {
  const Result eval =
      tfw("eval tiny-train-tokenformer --json --no-record --corpus jargon --corpus fortunes --windows 32");
  ASSERT_EQ(eval.code, 0) << eval.output;
  const nlohmann::json results = json_of(eval)["results"];
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["corpus"], "jargon");
  EXPECT_EQ(results[1]["corpus"], "fortunes");
  for (const auto& r : results) {
    EXPECT_EQ(r["tokens"], 32 * 64);
    // A kjv-trained byte model on other English: worse than on kjv, far better than chance.
    EXPECT_GT(r["loss"].get<double>(), 1.0);
    EXPECT_LT(r["loss"].get<double>(), std::log(256.0));
  }
  // Their validation splits hold 1 in 20 of each text's 64 KiB blocks.
  const Result listed = capture(std::string(TFW_BINARY) + " data list --json --home " + kHome);
  EXPECT_NE(listed.output.find("\"jargon\""), std::string::npos) << listed.output;
}

// `tfw sample`: the same text with and without the key/value cache (greedy, past several
// context restarts), the same text for the same seed, and another for another seed.
TEST_F(Eval, SampleIsTheSameWithTheCacheAndForASeed) {
  const std::string prompt = "sample tiny-train-tokenformer --quiet --prompt 'In the beginning God' --tokens 150 ";
  const Result cached = capture(TFW_BINARY " " + prompt + "--temperature 0 --home " + kHome, false);
  const Result recomputed = capture(TFW_BINARY " " + prompt + "--temperature 0 --no-cache --home " + kHome, false);
  ASSERT_EQ(cached.code, 0) << cached.output;
  EXPECT_EQ(cached.out, recomputed.out);
  EXPECT_EQ(cached.output.rfind("In the beginning God", 0), 0u) << cached.output;
  EXPECT_EQ(cached.out.size(), std::string("In the beginning God").size() + 150 + 1);  // byte tokens, a newline
  const Result a = capture(TFW_BINARY " " + prompt + "--seed 7 --top-k 20 --home " + kHome, false);
  const Result b = capture(TFW_BINARY " " + prompt + "--seed 7 --top-k 20 --home " + kHome, false);
  const Result c = capture(TFW_BINARY " " + prompt + "--seed 8 --top-k 20 --home " + kHome, false);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  const Result empty = tfw("sample tiny-train-tokenformer --prompt ''");
  EXPECT_EQ(empty.code, 2) << empty.output;
  EXPECT_NE(empty.output.find("--prompt is empty"), std::string::npos) << empty.output;
}

TEST_F(Eval, BadInputIsAClearErrorAndRecordsNothing) {
  const std::string count = "sqlite3 " + kHome + "/runs.db \"SELECT COUNT(*) FROM evaluations\"";
  const std::string before = capture(count).out;
  Result missing = tfw("eval tiny-train-tokenformer --corpus /nonexistent/text.txt");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find("--corpus /nonexistent/text.txt: no such file or folder"), std::string::npos)
      << missing.output;
  Result unknown = tfw("eval tiny-train-tokenformer --corpus nosuchcorpus");
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  const std::string short_dir = shards_from_kjv("short", 40);
  Result too_short = tfw("eval tiny-train-tokenformer --corpus " + short_dir);
  EXPECT_EQ(too_short.code, 2) << too_short.output;
  EXPECT_NE(too_short.output.find("its validation text has 40 tokens, shorter than one window of 65"),
            std::string::npos)
      << too_short.output;
  // Shards made with another tokenizer.
  const std::string gpt2_dir = shards_from_kjv("gpt2-shards", 1000);
  std::ifstream meta_in(kHome + "/data/kjv-byte/meta.toml");
  std::string meta((std::istreambuf_iterator<char>(meta_in)), {});
  ASSERT_NE(meta.find("tokenizer = 'byte'"), std::string::npos) << meta;
  meta.replace(meta.find("tokenizer = 'byte'"), 18, "tokenizer = 'gpt2'");
  std::ofstream(gpt2_dir + "/meta.toml") << meta;
  Result mismatch = tfw("eval tiny-train-tokenformer --corpus " + gpt2_dir);
  EXPECT_EQ(mismatch.code, 2) << mismatch.output;
  EXPECT_NE(mismatch.output.find("were made with the gpt2 tokenizer, the model reads byte tokens"), std::string::npos)
      << mismatch.output;
  Result long_window = tfw("eval tiny-train-tokenformer --seq-len 65");
  EXPECT_EQ(long_window.code, 2) << long_window.output;
  EXPECT_NE(long_window.output.find("exceeds the model's context (64 tokens)"), std::string::npos)
      << long_window.output;
  Result no_target = tfw("eval nosuchrun");
  EXPECT_EQ(no_target.code, 2) << no_target.output;
  EXPECT_EQ(capture(count).out, before) << "nothing recorded";

  // A checkpoint of a family no loaded plugin provides: the sample plugin's bigram model.
  const std::string plugin = std::string("TFW_PLUGIN_PATH=") + TFW_SAMPLE_PLUGIN_DIR + "/good";
  const std::string config = kHome + "/bigram.toml";
  std::ofstream(config)
      << "name = \"bigram\"\nfamily = \"bigram\"\n[model]\nd = 8\nvocab = 256\n[data]\ncorpus = \"kjv\"\n"
         "[train]\nbatch_size = 4\nmax_steps = 2\neval_every = 2\neval_batches = 1\ncheckpoint_every = 2\n";
  const Result bigram = tfw("train " + config, plugin);
  ASSERT_EQ(bigram.code, 0) << bigram.output;
  const Result evaluated = tfw("eval bigram --json --no-record", plugin);
  EXPECT_EQ(evaluated.code, 0) << evaluated.output;
  Result orphan = tfw("eval bigram");
  EXPECT_EQ(orphan.code, 2) << orphan.output;
  EXPECT_NE(orphan.output.find("unknown model family 'bigram'"), std::string::npos) << orphan.output;
  EXPECT_NE(orphan.output.find("the checkpoint needs the plugin of its model family"), std::string::npos)
      << orphan.output;
}

}  // namespace test_eval
