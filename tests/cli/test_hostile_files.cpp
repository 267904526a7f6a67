// Issue 50, the third hostile-input campaign, end to end through the real tfw binary:
// - a path that a stored config names (a checkpoint's, a bundle's) is data, not an order: tfw
//   reads it only inside TFW_HOME, or when the user names it, and writes shards with the home's
//   mode;
// - a bundle run that names itself as its parent is refused before anything is written;
// - a bundle line of millions of empty arrays is refused by a count taken while it is parsed,
//   within a bounded memory;
// and from issue 51: a finished run is not resumed (its record stays as it was).
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/sha256.h"
#include "engine/machine/cores.h"
#include "tests/cli/run_command.h"

namespace test_hostile_files {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

const std::string kWork = "/tmp/tfw-test-hostile-files-" + std::to_string(::getpid());
const std::string kHome = kWork + "/home";        // trained a run on a corpus outside it
const std::string kOutside = kWork + "/outside";  // that corpus: a folder of text

Result tfw(const std::string& arguments) { return capture(TFW_BINARY " " + arguments); }

std::string sql(const std::string& home, const std::string& query) {
  return capture("sqlite3 " + home + "/runs.db \"" + query + "\"").out;
}

std::string checkpoint_of(const std::string& home) {
  for (const auto& entry : fs::directory_iterator(home + "/runs/base/checkpoints")) {
    if (entry.path().extension() == ".safetensors") return entry.path().string();
  }
  return "";
}

std::vector<std::string> gz_lines(const std::string& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  std::string text;
  char buffer[1 << 16];
  for (int n; in != nullptr && (n = gzread(in, buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
  if (in != nullptr) gzclose(in);
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

void gz_write(const std::string& path, const std::vector<std::string>& lines) {
  gzFile out = gzopen(path.c_str(), "wb");
  for (const std::string& line : lines) {
    gzwrite(out, line.data(), static_cast<unsigned>(line.size()));
    gzwrite(out, "\n", 1);
  }
  gzclose(out);
}

class HostileFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(kWork);
    fs::create_directories(kOutside);
    std::ofstream text(kOutside + "/text.txt");
    for (int i = 0; i < 3000; ++i) text << "In the beginning God created the heaven and the earth, line " << i << ".\n";
    text.close();
    const Result base =
        tfw(fmt::format("train {}/experiments/mini/tiny-train-tokenformer.toml --home {} --name base "
                        "--set data.corpus={} --set train.max_steps=6 --set train.checkpoint_every=3 "
                        "--set train.eval_every=3",
                        TFW_SOURCE_DIR, kHome, kOutside));
    ASSERT_EQ(base.code, 0) << base.output;
  }
  static void TearDownTestSuite() { fs::remove_all(kWork); }
};

// Issue 50 (high, 1): `tfw eval CK` in another home read the corpus its checkpoint named
// (/etc in the campaign) and wrote it world-readable into that home.
TEST_F(HostileFiles, ACheckpointsCorpusOutsideTheHomeIsReadOnlyWhenTheUserNamesIt) {
  const std::string checkpoint = checkpoint_of(kHome);
  ASSERT_NE(checkpoint, "");
  const std::string other = kWork + "/other";
  fs::create_directories(other);
  fs::permissions(other, fs::perms::owner_all);  // a private home: 0700

  const Result refused = tfw(fmt::format("eval {} --windows 2 --no-record --home {}", checkpoint, other));
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_NE(refused.err.find("names data.corpus = '" + kOutside + "', outside TFW_HOME"), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--corpus " + kOutside), std::string::npos) << "the hint names the way: " << refused.err;
  EXPECT_FALSE(fs::exists(other + "/data")) << "nothing was read or written";

  // Named by the user, it is read; its shards get the home's mode, without execute bits.
  const Result named =
      tfw(fmt::format("eval {} --windows 2 --no-record --home {} --corpus {}", checkpoint, other, kOutside));
  ASSERT_EQ(named.code, 0) << named.output;
  for (const char* file : {"train.bin", "val.bin", "meta.toml"}) {
    struct stat st {};
    ASSERT_EQ(::stat((other + "/data/outside-byte/" + file).c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << file;
  }
  // The run's own home holds its prepared shards: its own checkpoint evaluates there as before.
  const Result own = tfw(fmt::format("eval {} --windows 2 --no-record --home {}", checkpoint, kHome));
  EXPECT_EQ(own.code, 0) << own.output;

  // Resuming reads the stored config too: in a copy of the home without the shards (a home is
  // whole when copied), the path is not read.
  const std::string copy = kWork + "/no-shards";
  ASSERT_EQ(capture("cp -a " + kHome + " " + copy).code, 0);
  fs::remove_all(copy + "/data");
  const std::string record = sql(copy, "SELECT status, tokens, final_metrics FROM runs WHERE name = 'base'");
  const Result resumed = tfw(fmt::format("train --resume base --home {} --set train.max_steps=9 --extend keep", copy));
  EXPECT_EQ(resumed.code, 2) << resumed.output;
  EXPECT_NE(resumed.err.find("run 'base''s stored config names data.corpus"), std::string::npos) << resumed.err;
  EXPECT_EQ(sql(copy, "SELECT status, tokens, final_metrics FROM runs WHERE name = 'base'"), record);
  EXPECT_FALSE(fs::exists(copy + "/data/outside-byte")) << "the path was read";
}

// Issue 51: resuming a finished run exited 0, printed "0 tokens/s" and rewrote its record.
TEST_F(HostileFiles, AFinishedRunIsNotResumedAndItsRecordStays) {
  const std::string query = "SELECT status, tokens, flops, ended, final_metrics FROM runs WHERE name = 'base'";
  const std::string before = sql(kHome, query);
  ASSERT_NE(before.find("finished|"), std::string::npos) << before;
  const Result resumed = tfw("train --resume base --home " + kHome);
  EXPECT_EQ(resumed.code, 2) << resumed.output;
  EXPECT_NE(resumed.err.find("run 'base' has trained all 6 steps of its budget"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("--set train.max_steps=N --extend keep"), std::string::npos) << resumed.err;
  EXPECT_EQ(sql(kHome, query), before);
  // A raised budget is a resume with steps to train.
  const Result further = tfw("train --resume base --home " + kHome + " --set train.max_steps=8 --extend keep");
  EXPECT_EQ(further.code, 0) << further.output;
  EXPECT_EQ(sql(kHome,
                "SELECT COUNT(*) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.name = 'base' AND "
                "m.key = 'train/loss'"),
            "8\n");
}

// Issue 50 (medium, 7): a resume started just before `runs delete` of the same run went
// unrecorded; two resumes of one run both trained. One process holds a run while it trains it.
TEST_F(HostileFiles, ARunBeingTrainedIsHeldByOneProcess) {
  const std::string home = kWork + "/held";
  const Result trained =
      tfw(fmt::format("train {}/experiments/mini/tiny-train-tokenformer.toml --home {} --name held "
                      "--set train.max_steps=4 --set train.checkpoint_every=2",
                      TFW_SOURCE_DIR, home));
  ASSERT_EQ(trained.code, 0) << trained.output;
  const std::string script = fmt::format(R"(
T={0}; H={1}
$T train --resume held --home $H --set train.max_steps=100000 --extend keep > $H/first.log 2>&1 &
first=$!
for i in $(seq 600); do grep -q "^step " $H/first.log 2> /dev/null && break; sleep 0.1; done
$T train --resume held --home $H --set train.max_steps=100000 --extend keep > $H/second.log 2>&1
echo "second $?"
$T runs delete held --files --home $H > $H/delete.log 2>&1
echo "delete $?"
kill -INT $first; wait $first
echo "first $?"
)",
                                         TFW_BINARY, home);
  std::ofstream(kWork + "/held.sh") << script;
  const Result run = capture("bash " + kWork + "/held.sh");
  EXPECT_NE(run.out.find("second 2\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("delete 2\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("first 130\n"), std::string::npos) << run.out;
  auto text = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_NE(text(home + "/second.log").find("run 'held' is held by another tfw process (pid "), std::string::npos)
      << text(home + "/second.log");
  EXPECT_NE(text(home + "/delete.log").find("is held by another tfw process"), std::string::npos)
      << text(home + "/delete.log");
  // The first resume's training is recorded, and the run is whole: resumable where it stopped.
  EXPECT_EQ(sql(home, "SELECT status FROM runs WHERE name = 'held'"), "killed\n");
  EXPECT_TRUE(fs::exists(home + "/runs/held/checkpoints"));
}

// Issue 50 (medium, 10): a checkpoint's thread count was obeyed: 1024 started 1,026 threads on 2
// cores. A count above the cores this process may run on is capped, and the run says so.
TEST_F(HostileFiles, ARecordedThreadCountAboveTheCoresIsCapped) {
  const int cores = tfw::cores_usable();
  const std::string home = kWork + "/threads";
  const Result trained =
      tfw(fmt::format("--threads {} train {}/experiments/mini/tiny-train-tokenformer.toml --home {} "
                      "--name many --set train.max_steps=2 --set train.checkpoint_every=2",
                      4 * cores, TFW_SOURCE_DIR, home));
  ASSERT_EQ(trained.code, 0) << trained.output;
  const Result resumed = tfw(fmt::format("train --resume many --home {} --set train.max_steps=3 --extend keep", home));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.err.find(
                fmt::format("threads: {}, the cores this process may run on; the run recorded {}", cores, 4 * cores)),
            std::string::npos)
      << resumed.err;
}

// Issue 51: two `tfw run` of one file in one home at once (two members of a lab sharing a
// home) ended with a grown run whose parent link was empty. Each run is held by the process
// that trains it, so the second batch is refused run by run and the lineage stays whole.
TEST_F(HostileFiles, TwoBatchesOfOneFileInOneHomeKeepTheLineage) {
  const std::string home = kWork + "/two-batches";
  const std::string script = fmt::format(R"(
{0} run {1}/tests/data/tiny-experiment.toml --home {2} > {2}-a.log 2>&1 &
a=$!
{0} run {1}/tests/data/tiny-experiment.toml --home {2} > {2}-b.log 2>&1 &
b=$!
wait $a; echo "a $?"
wait $b; echo "b $?"
)",
                                         TFW_BINARY, TFW_SOURCE_DIR, home);
  std::ofstream(kWork + "/two-batches.sh") << script;
  const Result both = capture("bash " + kWork + "/two-batches.sh");
  // Both finish: a batch waits for a run the other trains, then skips it as finished.
  EXPECT_NE(both.out.find("a 0\n"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("b 0\n"), std::string::npos) << both.out;
  // Every run once, finished, and the grown one is the small one's child.
  EXPECT_EQ(sql(home, "SELECT name, status FROM runs ORDER BY name"),
            "baseline|finished\ngrown|finished\nsmall|finished\n");
  EXPECT_EQ(sql(home, "SELECT p.name FROM runs c JOIN runs p ON p.id = c.parent_run_id WHERE c.name = 'grown'"),
            "small\n");
  // Running the file again now trains nothing and leaves the store as it is.
  const std::string before = sql(home, "SELECT id, name, status, parent_run_id, tokens FROM runs ORDER BY id");
  const Result again = tfw(fmt::format("run {}/tests/data/tiny-experiment.toml --home {}", TFW_SOURCE_DIR, home));
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(sql(home, "SELECT id, name, status, parent_run_id, tokens FROM runs ORDER BY id"), before);
}

// Issue 50 (high, 2): a run listed as its own parent was imported (exit 0), reading an empty
// optional: its stored parent became itself, or an unrelated run.
TEST_F(HostileFiles, ABundleRunThatIsItsOwnParentIsRefusedBeforeAnyWrite) {
  // Issue 51: --out in a folder that does not exist yet made "cannot write the bundle".
  const std::string good = kWork + "/bundles/good.tfwb", bad = kWork + "/self-parent.tfwb";
  const Result exported = tfw(fmt::format("runs export base --out {} --home {}", good, kHome));
  ASSERT_EQ(exported.code, 0) << exported.output;
  std::vector<std::string> lines = gz_lines(good);
  ASSERT_GE(lines.size(), 3u);
  nlohmann::json line = nlohmann::json::parse(lines[1]);
  nlohmann::json& run = line["run"];
  run["parent"] = {{"experiment", run["experiment"]}, {"name", run["name"]}};
  line["sha256"] = tfw::sha256_hex(run.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  lines[1] = line.dump();
  gz_write(bad, lines);

  const std::string home = kWork + "/import";
  fs::create_directories(home);
  const Result imported = tfw(fmt::format("runs import {} --home {}", bad, home));
  EXPECT_EQ(imported.code, 2) << imported.output;
  EXPECT_NE(imported.err.find("run '" + run["experiment"].get<std::string>() + "/base' names itself as its parent"),
            std::string::npos)
      << imported.err;
  EXPECT_NE(imported.err.find("nothing was imported"), std::string::npos) << imported.err;
  EXPECT_FALSE(fs::exists(home + "/runs.db") && sql(home, "SELECT COUNT(*) FROM runs") != "0\n");
  const Result report = tfw(
      fmt::format("report {}/tests/data/tiny-experiment.toml --bundle {} --out {}/report", TFW_SOURCE_DIR, bad, kWork));
  EXPECT_EQ(report.code, 2) << report.output;
  EXPECT_NE(report.err.find("names itself as its parent"), std::string::npos) << report.err;
}

// Issue 50 (low, 14): a metric key with a NUL was stored, read back cut at the NUL, and a
// re-import then said "differs". A key with a control character is refused.
TEST_F(HostileFiles, ABundleMetricKeyWithANulIsRefused) {
  const std::string good = kWork + "/nul-good.tfwb", bad = kWork + "/nul.tfwb";
  ASSERT_EQ(tfw(fmt::format("runs export base --out {} --home {}", good, kHome)).code, 0);
  std::vector<std::string> lines = gz_lines(good);
  ASSERT_GE(lines.size(), 3u);
  nlohmann::json line = nlohmann::json::parse(lines[1]);
  nlohmann::json& run = line["run"];
  run["metrics"][std::string("train/lo\0ss", 11)] = nlohmann::json::array({nlohmann::json::array({1, 0, 0, 0, 1.5})});
  line["sha256"] = tfw::sha256_hex(run.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  lines[1] = line.dump();
  gz_write(bad, lines);
  const Result imported = tfw(fmt::format("runs import {} --home {}/nul-home", bad, kWork));
  EXPECT_EQ(imported.code, 2) << imported.output;
  EXPECT_NE(imported.err.find("a metric key holds a control character"), std::string::npos) << imported.err;
}

// Issue 50 (medium, 6): an import killed half way left its run folders (checkpoints and
// config.toml) and its staging folder, and importing again was refused ("its folder holds
// checkpoints"). The staging folder's journal lists the folders it made; the next import
// removes those the store does not know. Here the debris of a killed import is laid out as it
// stood (a dead process's staging folder, its journal, a half-made run folder).
TEST_F(HostileFiles, AnImportKilledHalfWayIsCleanedUpByTheNextOne) {
  const std::string bundle = kWork + "/with-checkpoints.tfwb";
  const Result exported = tfw(fmt::format("runs export base --checkpoints --out {} --home {}", bundle, kHome));
  ASSERT_EQ(exported.code, 0) << exported.output;
  const nlohmann::json run = nlohmann::json::parse(gz_lines(bundle)[1])["run"];
  const std::string experiment = run["experiment"], name = run["name"];
  const std::string home = kWork + "/import-killed";
  const std::string run_dir = home + (experiment == "default" ? "/runs/" + name : "/runs/" + experiment + "/" + name);
  const std::string dead = capture("sh -c 'echo $$'").out;  // a process that has ended
  const std::string staging = home + "/.import-" + dead.substr(0, dead.find('\n'));
  fs::create_directories(staging);
  fs::create_directories(run_dir + "/checkpoints");
  std::ofstream(run_dir + "/checkpoints/step-00000003.safetensors") << "half written";
  std::ofstream(run_dir + "/config.toml") << "# half written\n";
  std::ofstream(staging + "/placed") << experiment << '\t' << name << '\t' << run_dir << "\n";

  const Result imported = tfw(fmt::format("runs import {} --home {}", bundle, home));
  ASSERT_EQ(imported.code, 0) << imported.output;
  EXPECT_FALSE(fs::exists(staging)) << "the dead import's staging folder is gone";
  for (const auto& entry : fs::directory_iterator(home)) {
    EXPECT_NE(entry.path().filename().string().rfind(".import-", 0), 0u) << entry.path();
  }
  EXPECT_EQ(sql(home, "SELECT COUNT(*) FROM runs"), "1\n");
  // The folder holds the bundle's files now, not the debris.
  std::ifstream config(run_dir + "/config.toml");
  const std::string text((std::istreambuf_iterator<char>(config)), {});
  EXPECT_EQ(text.find("half written"), std::string::npos) << text;
  std::size_t checkpoints = 0;
  for (const auto& entry : fs::directory_iterator(run_dir + "/checkpoints")) {
    if (entry.path().extension() == ".safetensors") {
      ++checkpoints;
      EXPECT_GT(fs::file_size(entry.path()), 1000u) << entry.path();
    }
  }
  EXPECT_GE(checkpoints, 1u);
}

// Issue 50 (low, 13): a link planted in the home carried an import's files outside it.
TEST_F(HostileFiles, AnImportDoesNotWriteThroughALinkPlantedInTheHome) {
  const std::string bundle = kWork + "/linked.tfwb";
  ASSERT_EQ(tfw(fmt::format("runs export base --checkpoints --out {} --home {}", bundle, kHome)).code, 0);
  const std::string home = kWork + "/linked-home", elsewhere = kWork + "/elsewhere";
  fs::create_directories(home);
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, home + "/runs");
  const Result imported = tfw(fmt::format("runs import {} --home {}", bundle, home));
  EXPECT_EQ(imported.code, 2) << imported.output;
  EXPECT_NE(imported.err.find("which leads outside " + home), std::string::npos) << imported.err;
  EXPECT_TRUE(fs::is_empty(elsewhere)) << "something was written through the link";
}

// Issue 50 (high, 4): a 249 KB bundle whose one line is 250 MiB of "[]," used 6.6 GB before it
// was refused. The count of objects and arrays stops it at 8 Mi of them.
TEST_F(HostileFiles, ABundleLineOfMillionsOfEmptyArraysIsRefusedInBoundedMemory) {
  const std::string good = kWork + "/good-arrays.tfwb", bad = kWork + "/arrays.tfwb";
  ASSERT_EQ(tfw(fmt::format("runs export base --out {} --home {}", good, kHome)).code, 0);
  std::vector<std::string> lines = gz_lines(good);
  ASSERT_GE(lines.size(), 3u);
  std::string flood = "[";
  flood.reserve(3 * 12000000);
  for (int i = 0; i < 12000000; ++i) flood += "[],";
  flood += "[]]";
  gz_write(bad, {lines[0], flood, lines.back()});
  EXPECT_LT(fs::file_size(bad), 1u << 20);
  const std::string home = kWork + "/import-arrays";
  const Result refused =
      capture(fmt::format("/usr/bin/time -f 'peak %M KB' " TFW_BINARY " runs import {} --home {}", bad, home));
  EXPECT_EQ(refused.code, 2) << refused.err.substr(0, 2000);
  EXPECT_NE(refused.err.find("line 2 holds more than 8388608 objects and arrays"), std::string::npos)
      << refused.err.substr(0, 2000);
  const std::size_t at = refused.err.rfind("peak ");
  ASSERT_NE(at, std::string::npos) << refused.err.substr(0, 2000);
  const long peak_kb = std::stol(refused.err.substr(at + 5));
  EXPECT_LT(peak_kb, 2L << 20) << "peak resident memory " << peak_kb << " KB (6.6 GB before)";
}

// Issue 50 (medium, 11): a 2 MB bundle expanded to a 2 GiB file in the home. Here a run line
// declares a 512 MiB checkpoint file of zeros (about 0.5 MB deflated): the import stops once
// the stream has inflated past 64 MiB at more than 100 times the bytes read, before the file
// is written whole, and leaves nothing behind.
TEST_F(HostileFiles, ABundleThatInflatesAHundredfoldIsRefusedBeforeItFillsTheDisk) {
  const std::string good = kWork + "/good-bomb.tfwb", bad = kWork + "/bomb.tfwb";
  ASSERT_EQ(tfw(fmt::format("runs export base --out {} --home {}", good, kHome)).code, 0);
  std::vector<std::string> lines = gz_lines(good);
  ASSERT_GE(lines.size(), 3u);
  nlohmann::json header = nlohmann::json::parse(lines[0]), line = nlohmann::json::parse(lines[1]);
  const std::uint64_t size = std::uint64_t{512} << 20;
  header["files"] = 1;
  line["files"] = nlohmann::json::array(
      {{{"name", "step-00000003.safetensors"}, {"bytes", size}, {"sha256", std::string(64, '0')}}});
  gzFile out = gzopen(bad.c_str(), "wb");
  for (const std::string& text : {header.dump() + "\n", line.dump() + "\n"}) {
    gzwrite(out, text.data(), static_cast<unsigned>(text.size()));
  }
  const std::vector<char> zeros(1 << 20, 0);
  for (std::uint64_t written = 0; written < size; written += zeros.size()) gzwrite(out, zeros.data(), zeros.size());
  gzwrite(out, (lines.back() + "\n").data(), static_cast<unsigned>(lines.back().size() + 1));
  gzclose(out);
  EXPECT_LT(fs::file_size(bad), 2u << 20);
  const std::string home = kWork + "/import-bomb";
  const Result refused = tfw(fmt::format("runs import {} --home {}", bad, home));
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_NE(refused.err.find("expands more than 100 times"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("refused as a decompression bomb; nothing was imported"), std::string::npos)
      << refused.err;
  std::uintmax_t left = 0;
  if (fs::exists(home)) {
    for (const auto& entry : fs::recursive_directory_iterator(home)) {
      if (entry.is_regular_file()) left += entry.file_size();
    }
  }
  EXPECT_LT(left, 8u << 20) << "bytes left in the home";
  EXPECT_FALSE(fs::exists(home + "/runs.db") && sql(home, "SELECT COUNT(*) FROM runs") != "0\n");
}

}  // namespace test_hostile_files
