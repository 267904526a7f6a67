// End to end: the real tfw binary, its exit codes (0 ok, 1 runtime, 2 usage/config),
// its messages and its --json output.
#include <sys/wait.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <chrono>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stb_image.h>

#include "engine/config/run_config.h"
#include "engine/config/schedule.h"
#include "engine/machine/cores.h"
#include "engine/machine/memory_check.h"
#include "tests/cli/run_command.h"
#include "tests/support.h"
#include "workbench/common/first_steps.h"

namespace test_cli {

using tfw::test::capture;
using tfw::test::Result;

Result tfw(const std::string& arguments, const std::string& environment = "") {
  return capture(environment + " " TFW_BINARY " " + arguments);
}

// stdout only: for --json output while progress goes to stderr.
Result tfw_json(const std::string& arguments) { return capture(TFW_BINARY " " + arguments, false); }

// Runs a bash script (written to a file, so no quoting games), stdout and stderr together.
Result tfw_shell(const std::string& script) {
  const std::string path = "/tmp/tfw-test-script-" + std::to_string(getpid()) + ".sh";
  std::ofstream(path) << script << "\n";
  return capture("bash " + path);
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
  nlohmann::json json = nlohmann::json::parse(run.out);
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
  nlohmann::json json = nlohmann::json::parse(run.out);
  ASSERT_EQ(json.size(), 2u);
  ASSERT_EQ(json[0]["lengths"].size(), 2u);
  const auto& row = json[0]["lengths"][1];
  EXPECT_EQ(row["seq_len"].get<std::int64_t>(), 4096);
  EXPECT_EQ(row["forward_per_sequence"].get<std::int64_t>(), 4096 * row["forward_per_token"].get<std::int64_t>());
  EXPECT_EQ(row["token_token_per_token"].get<std::int64_t>(), 4LL * 12 * 768 * 4096);
  EXPECT_EQ(json[1]["parameters"].get<std::int64_t>(), 353601536);
  // --measure adds the measured forward time per token beside the formula.
  Result measured = tfw("flops --json --measure " + kMini + "tiny-tokenformer.toml --lengths 16,64");
  ASSERT_EQ(measured.code, 0) << measured.output;
  nlohmann::json timing = nlohmann::json::parse(measured.out)[0]["lengths"];
  ASSERT_EQ(timing.size(), 2u);
  for (const auto& row : timing) {
    EXPECT_GT(row["measured_seconds_per_token"].get<double>(), 0.0);
    EXPECT_NEAR(row["measured_flops_per_second"].get<double>(),
                row["forward_per_token"].get<double>() / row["measured_seconds_per_token"].get<double>(),
                1e-6 * row["measured_flops_per_second"].get<double>());
  }
}

TEST(Cli, PluginsListsOutOfTreeAndRefusesWrongVersion) {
  std::string environment = "TFW_PLUGIN_PATH=" TFW_SAMPLE_PLUGIN_DIR "/good:" TFW_SAMPLE_PLUGIN_DIR "/wrong_version";
  Result run = tfw("plugins --json", environment);
  ASSERT_EQ(run.code, 0) << run.output;
  nlohmann::json json = nlohmann::json::parse(run.out);
  std::vector<std::string> names;
  for (const auto& plugin : json["plugins"]) names.push_back(plugin["name"]);
  EXPECT_EQ(names,
            (std::vector<std::string>{"tokenformer", "transformer", "vit", "vision_tokenformer", "bigram", "depth_grow",
                                      "stack", "hypercloning", "net2net", "pattention_grow", "script", "msg"}));
  EXPECT_EQ(json["plugins"][0]["origin"], "built-in");
  EXPECT_EQ(json["plugins"][4]["origin"], "TFW_PLUGIN_PATH");
  EXPECT_EQ(json["plugins"][2]["task"], "image_classification");
  EXPECT_EQ(json["plugins"][0]["task"], "language_model");
  EXPECT_EQ(json["plugins"][5]["kind"], "growth-method");
  ASSERT_EQ(json["rejected"].size(), 1u);
  EXPECT_NE(json["rejected"][0]["reason"].get<std::string>().find("plugin API version"), std::string::npos);
  Result human = tfw("plugins", environment);
  EXPECT_NE(human.output.find("refused " TFW_SAMPLE_PLUGIN_DIR "/wrong_version/tfw-bigram.so"), std::string::npos)
      << human.output;
}

TEST(Cli, SmokeTrainsBothTinyModels) {
  Result run = tfw("smoke --json --steps 8 " + kMini + "tiny-tokenformer.toml " + kMini + "tiny-transformer.toml");
  ASSERT_EQ(run.code, 0) << run.output;
  nlohmann::json json = nlohmann::json::parse(run.out);
  ASSERT_EQ(json.size(), 2u);
  for (const auto& result : json) {
    EXPECT_TRUE(result["loss_fell"].get<bool>()) << result.dump();
    EXPECT_EQ(result["losses"].size(), 8u);
  }
}

}  // namespace test_cli

namespace test_cli {

TEST(Cli, DataPrepareAndListAFolderCorpus) {
  std::string home = "/tmp/tfw-test-cli-home";
  std::string source = "/tmp/tfw-test-cli-corpus";
  std::system(("rm -rf " + home + " " + source + " && mkdir -p " + source).c_str());
  std::system(("printf 'hello tokenformer' > " + source + "/a.txt").c_str());
  Result prepare = tfw("data prepare " + source + " --json --home " + home);
  ASSERT_EQ(prepare.code, 0) << prepare.output;
  nlohmann::json json = nlohmann::json::parse(prepare.out);
  // 17 bytes, one block: too short for a validation block, so its last 17 / 20 -> 1 token is
  // the validation shard.
  EXPECT_EQ(json["train_tokens"].get<std::int64_t>(), 16);
  EXPECT_EQ(json["val_tokens"].get<std::int64_t>(), 1);
  EXPECT_EQ(json["path"], home + "/data/tfw-test-cli-corpus-byte");
  Result again = tfw("data prepare " + source + " --home " + home);
  EXPECT_NE(again.output.find("already prepared"), std::string::npos) << again.output;
  Result list = tfw("data list --json", "TFW_HOME=" + home);
  ASSERT_EQ(list.code, 0) << list.output;
  EXPECT_EQ(nlohmann::json::parse(list.out)["prepared"].size(), 1u);
  Result missing = tfw("data prepare /nonexistent/corpus --home " + home);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("unknown corpus '/nonexistent/corpus'"), std::string::npos) << missing.output;
}

}  // namespace test_cli

namespace test_cli {

// Starts `tfw train` in the background on the tiny kjv config, waits (at most 120 s) until
// checkpoint step 6 is complete, sends `signal_name`, waits, and prints "rc=N".
Result train_then_signal(const std::string& home, const std::string& signal_name) {
  std::string script =
      "rm -rf " + home + "; " TFW_BINARY " train " + kMini + "tiny-train-tokenformer.toml --home " + home +
      " --set train.max_steps=100000 --set train.checkpoint_every=3 --set train.keep_checkpoints=100 & pid=$!; "
      "for i in $(seq 1200); do [ -e " +
      home +
      "/runs/tiny-train-tokenformer/checkpoints/step-00000006.toml ] && break; "
      "sleep 0.1; done; kill -" +
      signal_name + " $pid; wait $pid; echo rc=$?";
  return tfw_shell(script);
}

TEST(Cli, TrainInterruptedByCtrlCCheckpointsAndResumes) {
  const std::string home = "/tmp/tfw-test-cli-sigint";
  Result run = train_then_signal(home, "INT");
  EXPECT_NE(run.output.find("rc=130"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("interrupted; resume with: tfw train --resume " + home + "/runs/tiny-train-tokenformer"),
            std::string::npos)
      << run.output;
  Result resumed =
      tfw("train --json --resume tiny-train-tokenformer --home " + home + " --set train.max_steps=40 --extend keep");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed "), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("\"steps\": 40"), std::string::npos) << resumed.output;
  Result mismatch = tfw("train " + kMini + "tiny-transformer.toml --resume tiny-train-tokenformer --home " + home);
  EXPECT_EQ(mismatch.code, 2) << mismatch.output;
  EXPECT_NE(mismatch.output.find("does not fit the checkpoint"), std::string::npos) << mismatch.output;
  Result exists = tfw("train " + kMini + "tiny-train-tokenformer.toml --home " + home);
  EXPECT_EQ(exists.code, 2) << exists.output;
  EXPECT_NE(exists.output.find("already exists"), std::string::npos) << exists.output;
}

TEST(Cli, TrainKilledWithSigkillLeavesLoadableCheckpoints) {
  const std::string home = "/tmp/tfw-test-cli-sigkill";
  Result run = train_then_signal(home, "KILL");
  EXPECT_NE(run.output.find("rc=137"), std::string::npos) << run.output;
  // The newest complete checkpoint (its manifest is written last) is where resume starts.
  std::int64_t newest = 0;
  for (const auto& entry : std::filesystem::directory_iterator(home + "/runs/tiny-train-tokenformer/checkpoints")) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 18 && name.rfind("step-", 0) == 0 && name.substr(13) == ".toml") {
      newest = std::max<std::int64_t>(newest, std::stoll(name.substr(5, 8)));
    }
  }
  ASSERT_GE(newest, 6);
  // The store shows the killed run as crashed once its heartbeat is older than the threshold.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Result listed = tfw("runs list --json --home " + home, "TFW_HEARTBEAT_TIMEOUT=1");
  ASSERT_EQ(listed.code, 0) << listed.output;
  nlohmann::json runs = nlohmann::json::parse(listed.out)["runs"];
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "crashed");
  const std::int64_t run_id = runs[0]["id"].get<std::int64_t>();
  Result finish = tfw("train --json --resume " + home + "/runs/tiny-train-tokenformer --home " + home +
                      " --set train.max_steps=" + std::to_string(newest + 3) + " --extend keep");
  ASSERT_EQ(finish.code, 0) << finish.output;
  EXPECT_NE(finish.output.find("resumed " + home + "/runs/tiny-train-tokenformer/checkpoints/step-" +
                               fmt::format("{:08d}", newest) + ".safetensors at step " + std::to_string(newest)),
            std::string::npos)
      << finish.output;
  EXPECT_NE(finish.output.find("\"steps\": " + std::to_string(newest + 3)), std::string::npos) << finish.output;
  // Resumed as the same run, now finished, with every step's loss recorded once.
  Result shown = tfw("runs show --json " + std::to_string(run_id) + " --home " + home);
  ASSERT_EQ(shown.code, 0) << shown.output;
  nlohmann::json record = nlohmann::json::parse(shown.out);
  EXPECT_EQ(record["status"], "finished");
  EXPECT_EQ(record["tokens"].get<std::int64_t>(), (newest + 3) * 16 * 64);
  EXPECT_EQ(tfw("runs list --json --home " + home).output.find("\"id\": 2"), std::string::npos);
  const std::string count = "sqlite3 " + home +
                            "/runs.db \"SELECT COUNT(*) FROM metrics WHERE run_id = " + std::to_string(run_id) +
                            " AND key = 'train/loss'\"";
  Result losses = capture(count);
  EXPECT_GE(std::stoll(losses.out), newest + 3);
}

}  // namespace test_cli

namespace test_cli {

// docs/cli.md lists every command the binary has, and every subcommand of those that have some.
TEST(Cli, DocsListEveryCommand) {
  std::ifstream in(std::string(TFW_SOURCE_DIR) + "/docs/cli.md");
  const std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(docs.empty());
  // The names under "Subcommands:" in a help text.
  auto subcommands = [](const std::string& help) {
    std::vector<std::string> names;
    const std::size_t at = help.find("Subcommands:\n");
    if (at == std::string::npos) return names;
    std::istringstream lines(help.substr(at + 13));
    for (std::string line; std::getline(lines, line) && line.rfind("  ", 0) == 0;) {
      std::istringstream words(line);
      std::string name;
      words >> name;
      names.push_back(name);
    }
    return names;
  };
  const std::vector<std::string> commands = subcommands(tfw("--help").out);
  ASSERT_GE(commands.size(), 20u);
  for (const std::string& command : commands) {
    EXPECT_NE(docs.find("`tfw " + command), std::string::npos) << "docs/cli.md does not list tfw " << command;
    for (const std::string& sub : subcommands(tfw(command + " --help").out)) {
      EXPECT_NE(docs.find("`tfw " + command + " " + sub), std::string::npos)
          << "docs/cli.md does not list tfw " << command << " " << sub;
    }
  }
}

// What an empty store suggests (the GUI's runs view, `tfw runs list`) works as written, from
// the repository's folder, in an empty home.
TEST(Cli, TheFirstCommandAnEmptyStoreSuggestsWorks) {
  const std::string home = "/tmp/tfw-test-cli-first-steps";
  std::system(("rm -rf " + home).c_str());
  Result empty = tfw("runs list --home " + home);
  EXPECT_EQ(empty.code, 2) << empty.output;  // no store there: an error whose hint is the first command
  EXPECT_NE(empty.output.find(tfw::kFirstTrainCommand), std::string::npos) << empty.output;
  const std::string command = std::string(tfw::kFirstTrainCommand).substr(4);  // without "tfw "
  Result first = capture(std::string("cd " TFW_SOURCE_DIR " && " TFW_BINARY " ") + command + " --home " + home);
  ASSERT_EQ(first.code, 0) << first.output;
  Result list = tfw("runs list --json --home " + home);
  const nlohmann::json runs = nlohmann::json::parse(list.out)["runs"];
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "finished");
}

TEST(Cli, RunsListShowCompareAndBadStores) {
  const std::string home = "/tmp/tfw-test-cli-runs";
  std::system(("rm -rf " + home).c_str());
  // b's name is longer than any fixed column: nothing may cut it.
  const std::string b = "b-a-run-name-longer-than-any-column-s0";
  for (const std::string& name : {std::string("a"), b}) {
    Result run = tfw("train " + kMini + "tiny-train-tokenformer.toml --json --name " + name + " --home " + home +
                     " --set train.max_steps=5" + (name == "a" ? " --set train.lr=0.002" : ""));
    ASSERT_EQ(run.code, 0) << run.output;
  }
  Result list = tfw("runs list --json --status finished --sort name --desc --home " + home);
  ASSERT_EQ(list.code, 0) << list.output;
  nlohmann::json runs = nlohmann::json::parse(list.out)["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["name"], b);
  EXPECT_EQ(runs[0]["tokens"].get<std::int64_t>(), 5 * 16 * 64);
  EXPECT_GT(runs[0]["final_metrics"]["val_loss"].get<double>(), 0.0);
  // --sort by any final metric, both ways.
  std::vector<double> losses = {runs[0]["final_metrics"]["val_loss"].get<double>(),
                                runs[1]["final_metrics"]["val_loss"].get<double>()};
  for (const char* order : {"", " --desc"}) {
    Result by_loss = tfw(std::string("runs list --json --sort val_loss") + order + " --home " + home);
    ASSERT_EQ(by_loss.code, 0) << by_loss.output;
    const nlohmann::json sorted = nlohmann::json::parse(by_loss.out)["runs"];
    const double first = sorted[0]["final_metrics"]["val_loss"], second = sorted[1]["final_metrics"]["val_loss"];
    EXPECT_TRUE(*order ? first >= second : first <= second) << by_loss.output;
  }
  Result by_speed = tfw("runs list --sort tokens_per_second --home " + home);
  ASSERT_EQ(by_speed.code, 0) << by_speed.output;
  EXPECT_NE(by_speed.output.find("tokens_per_second"), std::string::npos) << by_speed.output;  // its own column
  EXPECT_NE(by_speed.output.find(b), std::string::npos) << by_speed.output;
  // show: the duration, final metrics as a table, and floats as written in the config.
  Result show = tfw("runs show a --home " + home);
  EXPECT_NE(show.output.find("checkpoints:"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("crc32:"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("  duration "), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("final metrics:\n"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("lr = 0.002\n"), std::string::npos) << show.output;
  EXPECT_EQ(show.output.find("0.00200000"), std::string::npos) << show.output;
  EXPECT_EQ(show.output.find("0.90000000000000002"), std::string::npos) << show.output;
  Result compare = tfw("runs compare a " + b + " --json --home " + home);
  ASSERT_EQ(compare.code, 0) << compare.output;
  EXPECT_EQ(nlohmann::json::parse(compare.out)["runs"].size(), 2u);
  // The table: b's whole name, tokens/s as integers, and lr as written.
  Result table = tfw("runs compare a " + b + " --home " + home);
  ASSERT_EQ(table.code, 0) << table.output;
  EXPECT_NE(table.output.find(b), std::string::npos) << table.output;
  const std::size_t speed = table.output.find("tokens/s");
  ASSERT_NE(speed, std::string::npos) << table.output;
  const std::string speed_line = table.output.substr(speed, table.output.find('\n', speed) - speed);
  EXPECT_EQ(speed_line.find('.'), std::string::npos) << speed_line;
  EXPECT_NE(table.output.find("0.002 "), std::string::npos) << table.output;  // a's lr, beside b's 0.003
  EXPECT_NE(table.output.find(" 0.003\n"), std::string::npos) << table.output;
  Result missing = tfw("runs show nosuchrun --home " + home);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("no run 'nosuchrun'"), std::string::npos) << missing.output;
  Result sort = tfw("runs list --sort colour --home " + home);
  EXPECT_EQ(sort.code, 2);
  // A file that is not a store: a clear error, and the file is untouched.
  const std::string bad_home = "/tmp/tfw-test-cli-badstore";
  std::system(
      ("rm -rf " + bad_home + " && mkdir -p " + bad_home + " && echo 'my notes' > " + bad_home + "/runs.db").c_str());
  Result bad = tfw("train " + kMini + "tiny-train-tokenformer.toml --home " + bad_home);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("is not a tfw store"), std::string::npos) << bad.output;
  EXPECT_EQ(capture("cat " + bad_home + "/runs.db").out, "my notes\n");
}

}  // namespace test_cli

namespace test_cli {

TEST(Cli, GrowCheckThenTrainFromTheGrownCheckpointRecordsTheLineage) {
  const std::string home = "/tmp/tfw-test-cli-grow";
  std::system(("rm -rf " + home).c_str());
  Result small = tfw_json("train " + kMini + "growth-tokenformer-small.toml --json --home " + home +
                          " --set train.max_steps=20 --set train.eval_batches=2");
  ASSERT_EQ(small.code, 0) << small.output;
  const std::string checkpoint = nlohmann::json::parse(small.out)["last_checkpoint"];
  const double small_flops = nlohmann::json::parse(small.out)["training_flops"];
  Result grown = tfw_json("grow --method pattention_grow --from " + checkpoint + " --to " + kMini +
                          "growth-tokenformer-large.toml --out " + home + "/grown --check --json --home " + home +
                          " --set train.eval_batches=2");
  ASSERT_EQ(grown.code, 0) << grown.output;
  nlohmann::json g = nlohmann::json::parse(grown.out);
  EXPECT_TRUE(g["declared_exact"].get<bool>());
  EXPECT_LT(g["max_abs_logit_diff"].get<double>(), 1e-4);
  EXPECT_NEAR(g["loss_after"].get<double>(), g["loss_before"].get<double>(), 1e-5);
  EXPECT_EQ(g["parent_run"].get<std::int64_t>(), 1);
  EXPECT_DOUBLE_EQ(g["inherited_flops"].get<double>(), small_flops);
  // A non-exact method is reported as such, with the measured difference to show it.
  Result normal = tfw_json("grow --method pattention_grow --option key_init=normal --from " + checkpoint + " --to " +
                           kMini + "growth-tokenformer-large.toml --out " + home +
                           "/grown-normal --check --json --home " + home + " --set train.eval_batches=2");
  ASSERT_EQ(normal.code, 0) << normal.output;
  EXPECT_FALSE(nlohmann::json::parse(normal.out)["declared_exact"].get<bool>());
  EXPECT_GT(nlohmann::json::parse(normal.out)["max_abs_logit_diff"].get<double>(), 1e-3);
  // Train from the grown checkpoint: a child of run 1, whose budget includes run 1's FLOPs.
  Result child =
      tfw_json("train " + kMini + "growth-tokenformer-large.toml --init-from " + g["checkpoint"].get<std::string>() +
               " --name grown --json --home " + home + " --set train.max_steps=5");
  ASSERT_EQ(child.code, 0) << child.output;
  // Its time breakdown adds up: steps, data, evaluations (the one before the first step
  // included), checkpoints and growth fit in this process's time.
  const nlohmann::json time = nlohmann::json::parse(child.out)["time"];
  const double parts = time["step"].get<double>() + time["data"].get<double>() + time["eval"].get<double>() +
                       time["checkpoint"].get<double>() + time["growth"].get<double>();
  EXPECT_GT(time["eval"].get<double>(), 0.0);
  EXPECT_LE(parts, time["process"].get<double>() + 1e-6) << time.dump();
  EXPECT_GT(parts, 0.5 * time["process"].get<double>()) << time.dump();
  // Its memory: the memory check's own estimate for this config, and on the CPU the process's
  // peak resident set, which holds at least LibTorch's code (over 100 MB) and at most the machine.
  const nlohmann::json memory = nlohmann::json::parse(child.out)["memory"];
  const tfw::RunConfig grown_config =
      tfw::run_config_load(tfw::test::plugins(), kMini + "growth-tokenformer-large.toml", {"train.max_steps=5"});
  EXPECT_DOUBLE_EQ(memory["estimate_bytes"].get<double>(),
                   tfw::train_memory_bytes(grown_config, tfw::train_plan(grown_config)));
  EXPECT_EQ(memory["peak_of"], "process");
  EXPECT_GT(memory["peak_bytes"].get<double>(), 100e6) << memory.dump();
  EXPECT_LT(memory["peak_bytes"].get<double>(),
            static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)));
  Result shown = tfw_json("runs show grown --json --home " + home);
  nlohmann::json run = nlohmann::json::parse(shown.out);
  EXPECT_EQ(run["parent"].get<std::int64_t>(), 1);
  EXPECT_EQ(run["growth_method"], "pattention_grow");
  EXPECT_EQ(run["stage"].get<std::int64_t>(), 1);
  ASSERT_EQ(run["lineage"].size(), 2u);
  EXPECT_DOUBLE_EQ(run["cumulative_flops"].get<double>(), small_flops + run["flops"].get<double>());
  // The grown run is evaluated before its first step: its validation curve starts at the
  // growth point (step 0, own FLOPs 0), with no gap after the parent's.
  Result first = capture("sqlite3 " + home +
                         "/runs.db \"SELECT step, flops FROM metrics WHERE key = 'val/loss' AND "
                         "run_id = " +
                         std::to_string(run["id"].get<std::int64_t>()) + " ORDER BY step LIMIT 1\"");
  EXPECT_EQ(first.output, "0|0.0\n") << first.output;
  // Impossible targets and wrong families are refused with the reason (exit 2).
  Result wrong = tfw("grow --method hypercloning --from " + checkpoint + " --to " + kMini +
                     "growth-transformer-large.toml --out " + home + "/x --home " + home);
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.output.find("hypercloning grows transformer models; the checkpoint holds a tokenformer"),
            std::string::npos)
      << wrong.output;
  Result mismatch = tfw("train " + kMini + "growth-tokenformer-small.toml --init-from " +
                        g["checkpoint"].get<std::string>() + " --name bad --home " + home);
  EXPECT_EQ(mismatch.code, 2);
  EXPECT_NE(mismatch.output.find("does not fit the checkpoint"), std::string::npos) << mismatch.output;
}

// msg from the command line: `tfw grow --method msg` is exact at the growth; a run started
// from the grown checkpoint takes its mask ramp ([model.msg]) although the config does not
// name it, and its checkpoints carry the ramp for `tfw eval`.
TEST(Cli, MsgGrowThenTrainCarriesTheRamp) {
  const std::string home = "/tmp/tfw-test-cli-msg";
  std::filesystem::remove_all(home);
  Result small = tfw_json("train " + kMini + "growth-transformer-small.toml --json --home " + home +
                          " --set train.max_steps=20 --set train.eval_batches=2");
  ASSERT_EQ(small.code, 0) << small.output;
  const std::string checkpoint = nlohmann::json::parse(small.out)["last_checkpoint"];
  Result grown = tfw_json("grow --method msg --option ramp_steps=10 --from " + checkpoint + " --to " + kMini +
                          "growth-transformer-large.toml --out " + home + "/grown --check --json --home " + home +
                          " --set train.eval_batches=2");
  ASSERT_EQ(grown.code, 0) << grown.output;
  const nlohmann::json g = nlohmann::json::parse(grown.out);
  EXPECT_TRUE(g["declared_exact"].get<bool>());
  EXPECT_LT(g["max_abs_logit_diff"].get<double>(), 1e-4);
  Result child = tfw("train " + kMini + "growth-transformer-large.toml --init-from " + home +
                     "/grown --name after --json --home " + home +
                     " --set train.max_steps=6 --set train.checkpoint_every=3 --set train.eval_every=3 "
                     " --set train.keep_checkpoints=5");
  ASSERT_EQ(child.code, 0) << child.output;
  std::ifstream config(home + "/runs/after/config.toml");
  const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("[model.msg]"), std::string::npos) << text;
  EXPECT_NE(text.find("ramp_steps = 10"), std::string::npos) << text;
  Result evaluated =
      tfw("eval " + home + "/runs/after/checkpoints/step-00000003.safetensors --windows 2 --home " + home);
  EXPECT_EQ(evaluated.code, 0) << evaluated.output;
  EXPECT_NE(evaluated.output.find("msg(from d=64"), std::string::npos) << evaluated.output;
}

}  // namespace test_cli

namespace test_cli {

// (key, step, value) of every point of a run folder's metrics.jsonl, in order; wall times and
// speeds (which depend on the machine's load) left out.
std::vector<std::string> points_of(const std::string& run_dir) {
  std::vector<std::string> points;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json point = nlohmann::json::parse(line);
    const std::string key = point["key"];
    if (key.rfind("train/", 0) != 0 && key.rfind("val/", 0) != 0) continue;
    if (key == "train/tokens_per_s" || key == "train/mfu" || key == "train/step_seconds") continue;
    points.push_back(fmt::format("{} {} {}", key, point["step"].get<std::int64_t>(), point["value"].dump()));
  }
  return points;
}

// Issue 34: the same experiment file run twice gave different losses (1.9414 and 1.9439):
// the thread governor dropped a run from 2 threads to 1 beside a busy process, which splits
// the reductions differently. The same config and seed now give bit-identical points, with
// two busy processes started during the second run; the run records its thread count.
TEST(Cli, TheSameConfigAndSeedGiveTheSameNumbersBesideBusyProcesses) {
  const std::string a = "/tmp/tfw-test-same-a", b = "/tmp/tfw-test-same-b";
  const std::string train = kMini +
                            "tiny-train-tokenformer.toml --name r --set train.max_steps=30 "
                            "--set train.eval_every=10 --set train.checkpoint_every=15";
  // The default thread count (all the cores; the suite's one thread unset), which busy
  // processes beside it would slow down unevenly.
  Result first =
      tfw_shell("rm -rf " + a + " " + b + "; unset OMP_NUM_THREADS; " TFW_BINARY " train " + train + " --home " + a);
  ASSERT_EQ(first.code, 0) << first.output;
  Result second = tfw_shell(
      "unset OMP_NUM_THREADS; for i in 1 2; do (while :; do :; done) & done; sleep 0.5; " TFW_BINARY " train " + train +
      " --home " + b + "; code=$?; kill $(jobs -p); exit $code");
  ASSERT_EQ(second.code, 0) << second.output;
  const std::vector<std::string> pa = points_of(a + "/runs/r"), pb = points_of(b + "/runs/r");
  ASSERT_GT(pa.size(), 30u);
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(second.output.find("threads 2 -> 1"), std::string::npos) << second.output;
  // The checkpoint records the thread count it trained with.
  Result meta = tfw_shell(std::string(TFW_PYTHON) +
                          " -c \"from safetensors import safe_open; print('threads=' + "
                          "safe_open('" +
                          b + "/runs/r/checkpoints/step-00000030.safetensors', 'np').metadata()['threads'])\"");
  EXPECT_NE(meta.output.find(fmt::format("threads={}", tfw::cores_usable())), std::string::npos) << meta.output;
  // Issue 51: beside busy processes the peak probe reads low, and the MFU printed 223%. The
  // stored MFU is absent (not measured) or at most 1, and the summary never shows more than 100%.
  Result mfu = tfw_shell("sqlite3 " + b +
                         "/runs.db \"SELECT COALESCE(json_extract(final_metrics, '$.mfu'), 'none') "
                         "FROM runs WHERE name = 'r'\"");
  const std::string stored = mfu.out.substr(0, mfu.out.find('\n'));
  EXPECT_TRUE(stored == "none" || std::stod(stored) <= 1.0) << stored;
  const std::size_t at = second.out.find(", MFU ");
  ASSERT_NE(at, std::string::npos) << second.out;
  const std::string shown = second.out.substr(at + 6, second.out.find('\n', at) - at - 6);
  EXPECT_TRUE(shown.rfind("not measured", 0) == 0 || std::stod(shown) <= 100.0) << shown;
}

}  // namespace test_cli

namespace test_cli {

// A lineage grown three times (two stages grown offline, then a growth event inside the last
// run): `tfw attention` names each stage with the parameter tokens it made, and its PNG draws a
// dashed line after each stage but the last, with the names in the subtitle.
TEST(Cli, AttentionMarksEveryGrowthBoundaryOfTheLineage) {
  const std::string home = "/tmp/tfw-test-cli-stages";
  std::filesystem::remove_all(home);
  std::filesystem::create_directories(home);
  Result run = tfw("run " TFW_SOURCE_DIR "/tests/data/twice-grown.toml --home " + home);
  ASSERT_EQ(run.code, 0) << run.output;
  auto stages = [&](const std::string& projection) {
    Result map = tfw_json("attention grown2 --home " + home + " --text 'In the beginning' --layer 0 --proj " +
                          projection + " --out " + home + "/" + projection + " --json");
    EXPECT_EQ(map.code, 0) << map.output;
    return nlohmann::json::parse(map.out);
  };
  const nlohmann::json q = stages("q");
  EXPECT_EQ(q["parameter_tokens"], 64);
  EXPECT_EQ(q["stages"], nlohmann::json::parse(R"([{"name": "small", "tokens": 16}, {"name": "grown", "tokens": 32},
      {"name": "grown2", "tokens": 48}, {"name": "grown2@2", "tokens": 64}])"));
  // The FFN grew once: grown2 and its event left it at 64.
  const nlohmann::json ffn = stages("ffn");
  EXPECT_EQ(ffn["stages"],
            nlohmann::json::parse(R"([{"name": "small", "tokens": 32}, {"name": "grown", "tokens": 64}])"));
  // The PNG: a dashed, near-white line down each boundary column, none in the cells' middle.
  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load((home + "/q.png").c_str(), &w, &h, &channels, 3);
  ASSERT_NE(pixels, nullptr);
  const int x0 = q["png_layout"]["x"], y0 = q["png_layout"]["y"], cell = q["png_layout"]["cell_width"];
  const int rows_h = q["png_layout"]["cell_height"].get<int>() * q["input_tokens"].get<int>();
  auto white_in_column = [&](int x) {
    int count = 0;
    for (int y = y0; y < y0 + rows_h && y < h; ++y) {
      const unsigned char* p = pixels + 3 * (static_cast<std::size_t>(y) * w + x);
      count += p[0] >= 229 && p[1] >= 229 && p[2] >= 229;
    }
    return count;
  };
  for (int boundary : {16, 32, 48}) {
    EXPECT_GT(white_in_column(x0 + boundary * cell), rows_h / 3) << "no line after token " << boundary;
    EXPECT_LT(white_in_column(x0 + boundary * cell - cell / 2), rows_h / 8) << "a line inside token " << boundary - 1;
  }
  stbi_image_free(pixels);
}

}  // namespace test_cli
