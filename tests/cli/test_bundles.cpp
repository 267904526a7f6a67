// Issue 34: results that last. Run bundles (`tfw runs export|import`, `--bundle` for report
// and export), the stored config after `--resume --set`, `tfw runs diff`, and what produced a
// run (its provenance events). End to end with the real tfw binary, real stores and real gzip
// files; hostile bundles are written with Python's gzip and json.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_command.h"
#include "tests/cli/trained_once.h"

namespace test_bundles {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

Result shell(const std::string& script) {
  const std::string path = fmt::format("/tmp/tfw-test-bundle-script-{}.sh", getpid());
  std::ofstream(path) << "set -u\n" << script << "\n";
  return capture("bash " + path);
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::string kTfw = TFW_BINARY;
const std::string kPython = TFW_PYTHON;
const std::string kExperiment = std::string(TFW_SOURCE_DIR) + "/tests/data/tiny-experiment.toml";

// One home with the tiny experiment (a grown lineage and a baseline), trained once per suite
// run (tests/cli/trained_once.h) and copied for each process.
class Bundles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fmt::format("/tmp/tfw-test-bundles-{}", getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
    const std::string failure =
        tfw::test::trained_home(fmt::format("{} run {} --home $H", kTfw, kExperiment), root_ + "/a");
    ASSERT_EQ(failure, "");
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static std::string root_;
};
std::string Bundles::root_;

nlohmann::json runs_json(const std::string& home) {
  Result list = capture(fmt::format("{} runs list --json --home {}", kTfw, home), false);
  return nlohmann::json::parse(list.out)["runs"];
}

// Export, import into an empty home, export again: the same bytes; lineage and cumulative
// FLOPs as they were; importing again changes nothing.
TEST_F(Bundles, ExportImportExportGivesTheSameBytes) {
  const std::string a = root_ + "/a", b = root_ + "/round-b", first = root_ + "/first.tfwb",
                    second = root_ + "/second.tfwb";
  fs::remove_all(b);
  Result out = shell(fmt::format("{} runs export --experiment tiny --out {} --home {}", kTfw, first, a));
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_NE(out.output.find("3 runs"), std::string::npos) << out.output;
  Result in = shell(fmt::format("{} runs import {} --home {}", kTfw, first, b));
  ASSERT_EQ(in.code, 0) << in.output;
  EXPECT_NE(in.output.find("imported 3 runs"), std::string::npos) << in.output;
  Result again = shell(fmt::format("{} runs export --experiment tiny --out {} --home {}", kTfw, second, b));
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(read(first), read(second)) << "a bundle re-exported from its import differs";

  // The same runs give the same bytes: a second export of the first home too.
  Result twice = shell(fmt::format("{} runs export --experiment tiny --out {}.2 --home {}", kTfw, first, a));
  ASSERT_EQ(twice.code, 0) << twice.output;
  EXPECT_EQ(read(first), read(first + ".2"));

  // Lineage and compute survive: the grown run's parent is the small one, with its FLOPs.
  const nlohmann::json runs_a = runs_json(a), runs_b = runs_json(b);
  ASSERT_EQ(runs_b.size(), 3u);
  auto by_name = [](const nlohmann::json& runs, const std::string& name) {
    for (const auto& r : runs) {
      if (r["name"] == name) return r;
    }
    return nlohmann::json();
  };
  for (const char* name : {"small", "grown", "baseline"}) {
    const nlohmann::json ra = by_name(runs_a, name), rb = by_name(runs_b, name);
    ASSERT_FALSE(rb.is_null()) << name;
    EXPECT_EQ(ra["cumulative_flops"], rb["cumulative_flops"]) << name;
    EXPECT_EQ(ra["inherited_flops"], rb["inherited_flops"]) << name;
    EXPECT_EQ(ra["flops"], rb["flops"]) << name;
    EXPECT_EQ(ra["final_metrics"], rb["final_metrics"]) << name;
  }
  EXPECT_EQ(by_name(runs_b, "grown")["parent"], by_name(runs_b, "small")["id"]);
  EXPECT_GT(by_name(runs_b, "grown")["inherited_flops"].get<double>(), 0.0);

  // Importing twice changes nothing.
  const std::string before = read(b + "/runs.db");
  Result twice_in = shell(fmt::format("{} runs import {} --home {}", kTfw, first, b));
  ASSERT_EQ(twice_in.code, 0) << twice_in.output;
  EXPECT_NE(twice_in.output.find("imported 0 runs"), std::string::npos) << twice_in.output;
  EXPECT_NE(twice_in.output.find("3 already there and identical"), std::string::npos) << twice_in.output;
  EXPECT_EQ(runs_json(b), runs_b);
}

// A run named alone takes its ancestors with it; a stopped lineage imports whole.
TEST_F(Bundles, ARunTakesItsAncestors) {
  const std::string file = root_ + "/grown.tfwb", home = root_ + "/ancestors";
  fs::remove_all(home);
  Result out = shell(fmt::format("{} runs export grown --out {} --home {}/a", kTfw, file, root_));
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_NE(out.output.find("added 1 ancestor run: tiny/small"), std::string::npos) << out.output;
  Result in = shell(fmt::format("{} runs import {} --home {}", kTfw, file, home));
  ASSERT_EQ(in.code, 0) << in.output;
  EXPECT_EQ(runs_json(home).size(), 2u);
}

// Damaged, truncated, altered and newer bundles are refused with what is wrong, and nothing
// is imported: the home's store is not even created.
TEST_F(Bundles, DamagedTruncatedAlteredAndNewerBundlesImportNothing) {
  const std::string good = root_ + "/good.tfwb";
  ASSERT_EQ(shell(fmt::format("{} runs export --experiment tiny --out {} --home {}/a", kTfw, good, root_)).code, 0);
  const std::string python = fmt::format(R"(
import gzip, json, sys
good, root = sys.argv[1], sys.argv[2]
raw = open(good, 'rb').read()
lines = gzip.decompress(raw).split(b'\n')
# truncated: the first 60% of the compressed file
open(root + '/truncated.tfwb', 'wb').write(raw[:int(len(raw) * 0.6)])
# damaged: one compressed byte flipped in the middle
bad = bytearray(raw); bad[len(bad) // 2] ^= 0x55
open(root + '/damaged.tfwb', 'wb').write(bytes(bad))
# altered: a metric value changed, the hash left as it was
run = json.loads(lines[1])
key = sorted(run['run']['metrics'])[0]
run['run']['metrics'][key][0][4] = 0.123
altered = [lines[0], json.dumps(run, separators=(',', ':'), sort_keys=True).encode()] + lines[2:]
open(root + '/altered.tfwb', 'wb').write(gzip.compress(b'\n'.join(altered)))
# newer: format version 99
head = json.loads(lines[0]); head['format_version'] = 99
open(root + '/newer.tfwb', 'wb').write(gzip.compress(b'\n'.join([json.dumps(head).encode()] + lines[1:])))
# a run line cut off before the end line
open(root + '/short.tfwb', 'wb').write(gzip.compress(b'\n'.join(lines[:2]) + b'\n'))
# not gzip, and not a bundle
open(root + '/plain.tfwb', 'wb').write(gzip.decompress(raw))
# nested 100,000 deep
open(root + '/deep.tfwb', 'wb').write(gzip.compress(lines[0] + b'\n' + b'[' * 100000 + b']' * 100000 + b'\n'))
# a file name that would leave the run folder
run = json.loads(lines[1])
run['files'] = [{{'name': '../../../escaped', 'bytes': 1, 'sha256': '0' * 64}}]
open(root + '/escape.tfwb', 'wb').write(gzip.compress(b'\n'.join([lines[0], json.dumps(run).encode(), b'x'] + lines[2:])))
)");
  std::ofstream(root_ + "/make_bad.py") << python;
  Result made = shell(fmt::format("{} {}/make_bad.py {} {}", kPython, root_, good, root_));
  ASSERT_EQ(made.code, 0) << made.output;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", "truncated"},
      {"damaged", "damaged"},
      {"altered", "content hash"},
      {"newer", "format version is 99, and this tfw reads version 1"},
      {"short", "ends before its last line"},
      {"plain", "not gzip-compressed"},
      {"deep", "nests deeper than 8 levels"},
      {"escape", "is not a checkpoint's"}};
  for (const auto& [name, words] : cases) {
    const std::string home = root_ + "/refused-" + name;
    fs::remove_all(home);
    Result in = shell(fmt::format("{} runs import {}/{}.tfwb --home {}", kTfw, root_, name, home));
    EXPECT_EQ(in.code, 2) << name << ": " << in.output;
    EXPECT_NE(in.output.find("nothing was imported"), std::string::npos) << name << ": " << in.output;
    // A flipped byte shows as whatever it breaks first: the deflate stream, gzip's CRC, or a line.
    const bool found = name == "damaged" ? in.output.find("damaged") != std::string::npos ||
                                               in.output.find("content hash") != std::string::npos ||
                                               in.output.find("is not JSON") != std::string::npos
                                         : in.output.find(words) != std::string::npos;
    EXPECT_TRUE(found) << name << ": " << in.output;
    EXPECT_NE(in.output.find("hint:"), std::string::npos) << name << ": " << in.output;
    EXPECT_FALSE(fs::exists(home + "/runs.db")) << name << ": a refused bundle created a store";
    EXPECT_FALSE(fs::exists(root_ + "/escaped")) << name;
    EXPECT_FALSE(fs::exists(home)) << name << ": a refused import into a new home left the folder";
  }
}

// A run of the same experiment and name with other content is refused, naming both; the
// home is left as it was.
TEST_F(Bundles, ANameClashWithOtherContentIsRefused) {
  const std::string file = root_ + "/clash.tfwb", home = root_ + "/clash-home";
  fs::remove_all(home);
  ASSERT_EQ(shell(fmt::format("{} runs export baseline --out {} --home {}/a", kTfw, file, root_)).code, 0);
  // The same experiment run in another home with another lr: same names, other numbers.
  std::string text = read(kExperiment);
  text.replace(text.find("lr = 3e-3"), 9, "lr = 1e-3");
  std::ofstream(root_ + "/tiny-other.toml") << text;
  Result other = shell(fmt::format("{} run {}/tiny-other.toml --home {} --only baseline", kTfw, root_, home));
  ASSERT_EQ(other.code, 0) << other.output;
  const std::string before = read(home + "/runs.db");
  Result in = shell(fmt::format("{} runs import {} --home {}", kTfw, file, home));
  EXPECT_EQ(in.code, 2) << in.output;
  EXPECT_NE(in.output.find("run 'tiny/baseline' differs from run 1 'baseline'"), std::string::npos) << in.output;
  EXPECT_NE(in.output.find("config"), std::string::npos) << in.output;
  EXPECT_NE(in.output.find("nothing was imported"), std::string::npos) << in.output;
  EXPECT_EQ(read(home + "/runs.db"), before);
}

// With --checkpoints the files travel: the imported run evaluates and resumes in its new home.
TEST_F(Bundles, CheckpointsTravelAndResumeInTheNewHome) {
  const std::string file = root_ + "/with-checkpoints.tfwb", home = root_ + "/moved";
  fs::remove_all(home);
  Result out = shell(fmt::format("{} runs export baseline --checkpoints --out {} --home {}/a", kTfw, file, root_));
  ASSERT_EQ(out.code, 0) << out.output;
  Result in = shell(fmt::format("{} runs import {} --home {}", kTfw, file, home));
  ASSERT_EQ(in.code, 0) << in.output;
  EXPECT_EQ(in.output.find(" 0 checkpoint files"), std::string::npos) << in.output;
  // The checkpoint files are byte for byte the originals.
  const std::string from = root_ + "/a/runs/tiny/baseline/checkpoints", to = home + "/runs/tiny/baseline/checkpoints";
  std::size_t compared = 0;
  for (const auto& entry : fs::directory_iterator(from)) {
    ASSERT_TRUE(fs::exists(to + "/" + entry.path().filename().string())) << entry.path();
    EXPECT_EQ(read(entry.path().string()), read(to + "/" + entry.path().filename().string()));
    compared += 1;
  }
  EXPECT_GT(compared, 0u);
  Result resumed =
      shell(fmt::format("{} train --resume baseline --set train.max_steps=45 --extend keep --home {}", kTfw, home));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed"), std::string::npos) << resumed.output;
}

// `tfw report --bundle` gives the report `tfw report` gives from the home, but for the line
// that names the source and the date.
TEST_F(Bundles, AReportFromABundleIsTheReportFromTheHome) {
  const std::string file = root_ + "/report.tfwb";
  ASSERT_EQ(shell(fmt::format("{} runs export --experiment tiny --out {} --home {}/a", kTfw, file, root_)).code, 0);
  Result from_home = shell(fmt::format("{} report {} --out {}/r-home --home {}/a", kTfw, kExperiment, root_, root_));
  ASSERT_EQ(from_home.code, 0) << from_home.output;
  Result from_bundle =
      shell(fmt::format("cd /tmp && {} report {} --out {}/r-bundle --bundle {}", kTfw, kExperiment, root_, file));
  ASSERT_EQ(from_bundle.code, 0) << from_bundle.output;
  auto body = [](std::string text) {
    const std::size_t line = text.find("Generated on");
    return text.erase(line, text.find('\n', line) - line);
  };
  const std::string a = read(root_ + "/r-home/tiny.md"), b = read(root_ + "/r-bundle/tiny.md");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(body(a), body(b));
  EXPECT_NE(b.find("from the bundle " + file), std::string::npos);
  // Every figure is the same file.
  for (const auto& entry : fs::directory_iterator(root_ + "/r-home/figures/tiny")) {
    EXPECT_EQ(read(entry.path().string()), read(root_ + "/r-bundle/figures/tiny/" + entry.path().filename().string()))
        << entry.path().filename();
  }
  // The report says what produced the numbers.
  EXPECT_NE(b.find("## Provenance"), std::string::npos);
  EXPECT_NE(b.find("Every group and every comparison was produced alike."), std::string::npos) << b;
}

// Every run records what produced it: commit, LibTorch, processor, threads, precision.
TEST_F(Bundles, EveryRunRecordsWhatProducedIt) {
  Result show =
      capture(fmt::format("sqlite3 {}/a/runs.db \"SELECT payload FROM events WHERE kind = 'provenance'\"", root_));
  ASSERT_EQ(show.code, 0) << show.output;
  std::istringstream lines(show.out);
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json p = nlohmann::json::parse(line);
    EXPECT_EQ(p["libtorch"], "2.11.0");
    EXPECT_EQ(p["precision"], "fp32");
    EXPECT_EQ(p["device"], "cpu");
    EXPECT_GE(p["threads"].get<int>(), 1);
    EXPECT_FALSE(p["processor"].get<std::string>().empty());
    EXPECT_NE(p["processor"], "unknown");
    EXPECT_GE(p["git_commit"].get<std::string>().size(), 7u);
    EXPECT_FALSE(p["host"].get<std::string>().empty());
    n += 1;
  }
  EXPECT_EQ(n, 3u);  // one start per run
}

// A group whose seeds were produced by different thread counts (one run's provenance edited
// in the store, as another machine would have recorded it) is named in the report's warning;
// so is a comparison whose two sides differ, and the runs' bundle carries the edit.
TEST_F(Bundles, TheReportWarnsWhenAGroupWasProducedDifferently) {
  const std::string home = root_ + "/mixed", seeds = std::string(TFW_SOURCE_DIR) + "/tests/data/tiny-seeds.toml";
  fs::remove_all(home);
  Result made = shell(fmt::format("{} run {} --home {}", kTfw, seeds, home));
  ASSERT_EQ(made.code, 0) << made.output;
  Result edit =
      capture(fmt::format("sqlite3 {}/runs.db \"UPDATE events SET payload = json_set(payload, '$.threads', 7) WHERE "
                          "kind = 'provenance' AND "
                          "run_id = (SELECT id FROM runs WHERE name = 'baseline-s1')\"",
                          home));
  ASSERT_EQ(edit.code, 0) << edit.output;
  Result report = shell(fmt::format("{} report {} --out {}/report --home {}", kTfw, seeds, root_, home));
  ASSERT_EQ(report.code, 0) << report.output;
  const std::string text = read(root_ + "/report/tiny-seeds.md");
  EXPECT_NE(text.find("**Warning:** the runs of group `baseline` (or their ancestors) were produced differently"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("7 threads, fp32 (1 run)"), std::string::npos) << text;
  EXPECT_EQ(text.find("Every group and every comparison was produced alike."), std::string::npos) << text;
}

// Issue 34: after `--resume --set train.max_steps=... --extend keep`, the run folder's config
// said the new budget but the store kept the old one, so `runs compare` grouped the longer
// run with a shorter one "as seeds". The store's config is now the one that runs, with an
// event of what changed.
TEST_F(Bundles, AResumeWithSetUpdatesTheStoredConfig) {
  const std::string home = root_ + "/stale";
  fs::remove_all(home);
  const std::string train = std::string(TFW_SOURCE_DIR) + "/experiments/mini/tiny-train-tokenformer.toml";
  Result first =
      shell(fmt::format("{} train {} --name long --set train.max_steps=40 --set train.checkpoint_every=20 "
                        "--set train.eval_every=20 --home {} && {} train {} --name short --set train.max_steps=40 "
                        "--set train.checkpoint_every=20 --set train.eval_every=20 --set train.seed=1 --home {}",
                        kTfw, train, home, kTfw, train, home));
  ASSERT_EQ(first.code, 0) << first.output;
  Result resumed =
      shell(fmt::format("{} train --resume long --set train.max_steps=80 --extend keep --home {}", kTfw, home));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  Result show = capture(fmt::format("{} runs show long --json --home {}", kTfw, home), false);
  const nlohmann::json run = nlohmann::json::parse(show.out);
  const std::string config = run["config"].get<std::string>();
  EXPECT_NE(config.find("max_steps = 80"), std::string::npos) << config;
  Result event =
      capture(fmt::format("sqlite3 {}/runs.db \"SELECT step, payload FROM events WHERE kind = 'config'\"", home));
  EXPECT_NE(event.output.find(R"({"key":"train.max_steps","new":"80","old":"40"})"), std::string::npos) << event.output;
  EXPECT_EQ(event.output.rfind("40|", 0), 0u) << event.output;  // from the checkpoint it resumed at
  // `runs compare` no longer groups them as seeds, and shows what differs.
  Result compare = shell(fmt::format("{} runs compare long short --home {}", kTfw, home));
  ASSERT_EQ(compare.code, 0) << compare.output;
  EXPECT_EQ(compare.output.find("groups that differ only in seed"), std::string::npos) << compare.output;
  EXPECT_NE(compare.output.find("train.max_steps"), std::string::npos) << compare.output;
  // `tfw runs diff` names the keys.
  Result diff = shell(fmt::format("{} runs diff long short --home {}", kTfw, home));
  ASSERT_EQ(diff.code, 0) << diff.output;
  EXPECT_NE(diff.output.find("train.max_steps"), std::string::npos) << diff.output;
  EXPECT_NE(diff.output.find("train.seed"), std::string::npos) << diff.output;
  EXPECT_EQ(diff.output.find("model."), std::string::npos) << diff.output;
}

// `tfw run` refusing a finished run whose config changed names the keys that differ.
TEST_F(Bundles, TheChangedConfigRefusalNamesTheKeys) {
  std::string text = read(kExperiment);
  text.replace(text.find("max_steps = 40"), 14, "max_steps = 41");
  std::ofstream(root_ + "/tiny-changed.toml") << text;
  Result run = shell(fmt::format("{} run {}/tiny-changed.toml --home {}/a", kTfw, root_, root_));
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("baseline: train.max_steps = 40 in the store, 41 in the file"), std::string::npos)
      << run.output;
}

// `tfw eval` results ([experiment.eval]) travel with their run: the imported home holds the
// same evaluations (checkpoint in its own run folder, same values and times), a report can
// read them, and re-exporting gives the same bytes.
TEST_F(Bundles, EvaluationsTravelWithTheirRun) {
  const std::string a = root_ + "/a", home = root_ + "/evaluated", file = root_ + "/evaluated.tfwb";
  fs::remove_all(home);
  Result eval = shell(fmt::format("{} eval baseline --corpus fortunes --windows 8 --home {}", kTfw, a));
  ASSERT_EQ(eval.code, 0) << eval.output;
  Result out = shell(fmt::format("{} runs export baseline --out {} --home {}", kTfw, file, a));
  ASSERT_EQ(out.code, 0) << out.output;
  Result in = shell(fmt::format("{} runs import {} --home {}", kTfw, file, home));
  ASSERT_EQ(in.code, 0) << in.output;
  // Every column but the ids, with the checkpoint's folder named relative to its home.
  const std::string query = fmt::format(
      "{} -c \"import sqlite3, sys; home = sys.argv[1]; rows = sqlite3.connect(home + '/runs.db').execute("
      "'SELECT checkpoint, step, corpus, metric, value, windows, tokens, mode, created, blocks FROM evaluations "
      "ORDER BY step, corpus, metric').fetchall(); print(len(rows)); "
      "[print(r[0].replace(home, 'HOME'), *r[1:]) for r in rows]\"",
      kPython);
  Result from_a = capture(query + " " + a), from_home = capture(query + " " + home);
  ASSERT_EQ(from_a.code, 0) << from_a.output;
  EXPECT_NE(from_a.output.rfind("0\n", 0), 0u) << "no evaluation was recorded: " << from_a.output;
  EXPECT_NE(from_a.output.find("fortunes"), std::string::npos) << from_a.output;
  EXPECT_EQ(from_a.out, from_home.out);
  Result again = shell(fmt::format("{} runs export baseline --out {}.2 --home {}", kTfw, file, home));
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(read(file), read(file + ".2"));
}

}  // namespace test_bundles
