// The command line's two programs (workbench/cli/app.h): `tfw` runs the commands that compute
// nothing with a model without loading LibTorch, and hands every other line, unchanged, to
// `tfw-torch` beside it.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/cli/run_command.h"

namespace test_front {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

const std::string kTorch = (fs::path(TFW_BINARY).parent_path() / "tfw-torch").string();

// (That tfw links no LibTorch is tests/torch_free_links.sh's.)
TEST(Cli, TfwHandsWhatNeedsLibTorchToTfwTorchBesideItAndRunsTheRestItself) {
  // The same line gives the same output through either program: one the front runs itself
  // (data list), and lines it hands over (--version, and a command that loads a model).
  const std::string home = "/tmp/tfw-test-front-home";
  fs::remove_all(home);
  for (const std::string& line :
       {std::string("data list --json --home ") + home, std::string("--version"),
        fmt::format("params {}/experiments/mini/tiny-train-tokenformer.toml", TFW_SOURCE_DIR)}) {
    const Result a = capture(std::string(TFW_BINARY) + " " + line), b = capture(kTorch + " " + line);
    EXPECT_EQ(a.code, 0) << line << "\n" << a.output;
    EXPECT_EQ(a.out, b.out) << line;
    EXPECT_FALSE(a.out.empty()) << line;
  }

  // tfw alone in a folder: what it runs itself still works, and a line it hands over fails
  // with exit code 1, naming the program it looked for and how to get it back.
  const std::string alone = "/tmp/tfw-test-front-alone";
  fs::remove_all(alone);
  fs::create_directories(alone);
  fs::copy_file(TFW_BINARY, alone + "/tfw");
  const Result list = capture(fmt::format("{}/tfw data list --json --home {}", alone, home));
  EXPECT_EQ(list.code, 0) << list.output;
  EXPECT_EQ(list.out, "{\n  \"prepared\": []\n}\n");
  for (const std::string& line : {std::string("train x.toml"), std::string("--threads 2 runs list"), std::string("")}) {
    const Result handed = capture(fmt::format("{}/tfw {}", alone, line));
    EXPECT_EQ(handed.code, 1) << line << "\n" << handed.output;
    EXPECT_NE(handed.err.find(fmt::format("tfw: cannot start {}/tfw-torch (No such file or directory)", alone)),
              std::string::npos)
        << handed.err;
    EXPECT_NE(handed.err.find("hint: build it again"), std::string::npos) << handed.err;
  }
  fs::remove_all(alone);
  fs::remove_all(home);
}

}  // namespace test_front
