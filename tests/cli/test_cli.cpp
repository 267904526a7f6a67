// End to end: the real tfw binary, its exit codes (0 ok, 1 runtime, 2 usage/config),
// its messages and its --json output.
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

struct Result {
  int code;
  std::string output;  // stdout and stderr together
};

Result tfw(const std::string& arguments, const std::string& environment = "") {
  std::string command = environment + " " TFW_BINARY " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  Result run{-1, ""};
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) run.output += buffer.data();
  int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

const std::string kPaper = std::string(TFW_SOURCE_DIR) + "/experiments/paper/";
const std::string kMini = std::string(TFW_SOURCE_DIR) + "/experiments/mini/";

TEST(Cli, UsageErrorsExitTwoWithAMessage) {
  Result none = tfw("");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.output.find("tfw --help"), std::string::npos) << none.output;
  Result unknown = tfw("frobnicate");
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  Result bad_lengths = tfw("flops " + kPaper + "tokenformer-150m.toml --lengths 512,abc");
  EXPECT_EQ(bad_lengths.code, 2) << bad_lengths.output;
  Result missing = tfw("params /nonexistent.toml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("config file '/nonexistent.toml' not found"), std::string::npos) << missing.output;
  Result bad_key = tfw("params " + kPaper + "tokenformer-150m.toml --set model.n_atn=3");
  EXPECT_EQ(bad_key.code, 2);
  EXPECT_NE(bad_key.output.find("unknown key 'model.n_atn'"), std::string::npos) << bad_key.output;
  Result help = tfw("--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.output.find("params"), std::string::npos);
}

TEST(Cli, ParamsJsonHasTheParameterCountAndFlopsTerms) {
  Result run = tfw("params --json " + kPaper + "tokenformer-150m.toml");
  ASSERT_EQ(run.code, 0) << run.output;
  nlohmann::json json = nlohmann::json::parse(run.output);
  EXPECT_EQ(json["parameters"].get<std::int64_t>(), 151881216);
  EXPECT_EQ(json["family"], "tokenformer");
  EXPECT_EQ(json["flops_per_token"]["seq_len"].get<std::int64_t>(), 2048);
  EXPECT_EQ(json["flops_per_token"]["token_token"].get<std::int64_t>(), 4LL * 12 * 768 * 2048);
  EXPECT_EQ(json["flops_per_token"]["training"].get<std::int64_t>(),
            3 * json["flops_per_token"]["forward"].get<std::int64_t>());
  Result human = tfw("params " + kPaper + "tokenformer-150m.toml --set model.n_ffn=6144");
  ASSERT_EQ(human.code, 0) << human.output;
  EXPECT_NE(human.output.find("n_ffn=6144"), std::string::npos) << human.output;
  EXPECT_NE(human.output.find("208,504,320"), std::string::npos) << human.output;  // 151,881,216 + 12·2·768·3072
}

TEST(Cli, FlopsJsonPerLength) {
  Result run = tfw("flops --json " + kPaper + "tokenformer-scaling-124m.toml " + kPaper +
                "transformer-scaling-354m.toml --lengths 512,4096");
  ASSERT_EQ(run.code, 0) << run.output;
  nlohmann::json json = nlohmann::json::parse(run.output);
  ASSERT_EQ(json.size(), 2u);
  ASSERT_EQ(json[0]["lengths"].size(), 2u);
  const auto& row = json[0]["lengths"][1];
  EXPECT_EQ(row["seq_len"].get<std::int64_t>(), 4096);
  EXPECT_EQ(row["forward_per_sequence"].get<std::int64_t>(), 4096 * row["forward_per_token"].get<std::int64_t>());
  EXPECT_EQ(row["token_token_per_token"].get<std::int64_t>(), 4LL * 12 * 768 * 4096);
  EXPECT_EQ(json[1]["parameters"].get<std::int64_t>(), 353601536);
}

TEST(Cli, PluginsListsOutOfTreeAndRefusesWrongVersion) {
  std::string environment = "TFW_PLUGIN_PATH=" TFW_SAMPLE_PLUGIN_DIR "/good:" TFW_SAMPLE_PLUGIN_DIR "/wrong_version";
  Result run = tfw("plugins --json", environment);
  ASSERT_EQ(run.code, 0) << run.output;
  nlohmann::json json = nlohmann::json::parse(run.output);
  std::vector<std::string> names;
  for (const auto& plugin : json["plugins"]) names.push_back(plugin["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"tokenformer", "transformer", "bigram"}));
  EXPECT_EQ(json["plugins"][0]["origin"], "built-in");
  EXPECT_EQ(json["plugins"][2]["origin"], "TFW_PLUGIN_PATH");
  ASSERT_EQ(json["rejected"].size(), 1u);
  EXPECT_NE(json["rejected"][0]["reason"].get<std::string>().find("plugin API version"), std::string::npos);
  Result human = tfw("plugins", environment);
  EXPECT_NE(human.output.find("refused " TFW_SAMPLE_PLUGIN_DIR "/wrong_version/tfw-bigram.so"), std::string::npos)
      << human.output;
}

TEST(Cli, SmokeTrainsBothTinyModels) {
  Result run = tfw("smoke --json --steps 8 " + kMini + "tiny-tokenformer.toml " + kMini + "tiny-transformer.toml");
  ASSERT_EQ(run.code, 0) << run.output;
  nlohmann::json json = nlohmann::json::parse(run.output);
  ASSERT_EQ(json.size(), 2u);
  for (const auto& result : json) {
    EXPECT_TRUE(result["loss_fell"].get<bool>()) << result.dump();
    EXPECT_EQ(result["losses"].size(), 8u);
  }
}

}  // namespace

namespace {

TEST(Cli, DataPrepareAndListAFolderCorpus) {
  std::string home = "/tmp/tfw-test-cli-home";
  std::string source = "/tmp/tfw-test-cli-corpus";
  std::system(("rm -rf " + home + " " + source + " && mkdir -p " + source).c_str());
  std::system(("printf 'hello tokenformer' > " + source + "/a.txt").c_str());
  Result prepare = tfw("data prepare " + source + " --json --home " + home);
  ASSERT_EQ(prepare.code, 0) << prepare.output;
  nlohmann::json json = nlohmann::json::parse(prepare.output);
  EXPECT_EQ(json["train_tokens"].get<std::int64_t>(), 17);
  EXPECT_EQ(json["path"], home + "/data/tfw-test-cli-corpus-byte");
  Result again = tfw("data prepare " + source + " --home " + home);
  EXPECT_NE(again.output.find("already prepared"), std::string::npos) << again.output;
  Result list = tfw("data list --json", "TFW_HOME=" + home);
  ASSERT_EQ(list.code, 0) << list.output;
  EXPECT_EQ(nlohmann::json::parse(list.output)["prepared"].size(), 1u);
  Result missing = tfw("data prepare /nonexistent/corpus --home " + home);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("unknown corpus '/nonexistent/corpus'"), std::string::npos) << missing.output;
}

}  // namespace
