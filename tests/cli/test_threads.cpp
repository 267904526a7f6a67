// The default thread count of `tfw train` (engine/machine/cores.h): OMP_NUM_THREADS as libgomp
// reads it, else the cores the process may run on, and its split by `tfw run --jobs`.
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/machine/cores.h"
#include "tests/cli/run_command.h"

namespace test_threads {

using tfw::test::capture;
using tfw::test::Result;

const std::string kMini = std::string(TFW_SOURCE_DIR) + "/experiments/mini/";

// The thread count of a run started without --threads: OMP_NUM_THREADS where it is set and
// usable, else the cores the process may run on (its affinity), as its provenance records.
// The suite runs with OMP_NUM_THREADS=1 (tests/CMakeLists.txt), so each case sets or unsets it.
TEST(Cli, TheDefaultThreadCountIsOmpNumThreadsElseTheCoresThisProcessMayUse) {
  const std::string home = "/tmp/tfw-test-threads-default";
  std::filesystem::remove_all(home);
  int n = 0;
  // Trains one step as `name` with `environment` and `flags` before `train`; its recorded threads.
  auto threads_of = [&](const std::string& environment, const std::string& flags, std::string* err) -> std::string {
    const std::string name = fmt::format("t{}", n++);
    const Result run =
        capture(fmt::format("env {} {} {} train {}tiny-train-tokenformer.toml --home {} --name {} "
                            "--set train.max_steps=1",
                            environment, TFW_BINARY, flags, kMini, home, name));
    EXPECT_EQ(run.code, 0) << run.output;
    if (err != nullptr) *err = run.err;
    return capture(fmt::format("sqlite3 {}/runs.db \"SELECT json_extract(e.payload, '$.threads') FROM events e JOIN "
                               "runs r ON r.id = e.run_id WHERE r.name = '{}' AND e.kind = 'provenance'\"",
                               home, name))
        .out;
  };
  const int cores = tfw::cores_usable();
  std::string err;
  EXPECT_EQ(threads_of("OMP_NUM_THREADS=3", "", &err), "3\n");
  EXPECT_EQ(err.find("tfw: OMP_NUM_THREADS"), std::string::npos) << err;            // libgomp may say its own
  EXPECT_EQ(threads_of("OMP_NUM_THREADS=2,1", "", nullptr), "2\n");                 // the first level's count
  EXPECT_EQ(threads_of("'OMP_NUM_THREADS= +2 '", "", &err), "2\n");                 // as libgomp reads it
  EXPECT_EQ(err.find("tfw: OMP_NUM_THREADS"), std::string::npos) << err;            // libgomp may say its own
  EXPECT_EQ(threads_of("OMP_NUM_THREADS=", "", &err), fmt::format("{}\n", cores));  // empty: as unset
  EXPECT_EQ(err.find("tfw: OMP_NUM_THREADS"), std::string::npos) << err;            // libgomp may say its own
  EXPECT_EQ(threads_of("OMP_NUM_THREADS=3", "--threads 2", nullptr), "2\n");        // --threads chooses
  EXPECT_EQ(threads_of("-u OMP_NUM_THREADS", "", nullptr), fmt::format("{}\n", cores));
  // The affinity, not the machine: one core given by taskset.
  EXPECT_EQ(threads_of("-u OMP_NUM_THREADS taskset -c 0", "", nullptr), "1\n");
  for (const std::string bad : {"lots", "0", "5000", "99999999999999999999", "4,x"}) {
    EXPECT_EQ(threads_of("OMP_NUM_THREADS=" + bad, "", &err), fmt::format("{}\n", cores)) << bad;
    EXPECT_NE(err.find(fmt::format("tfw: OMP_NUM_THREADS={} is not a whole number from 1 to 4096 (or a list of them, "
                                   "one a level of nesting); using the {} core",
                                   bad, cores)),
              std::string::npos)
        << err;
  }
  // Given --threads, a bad OMP_NUM_THREADS goes unsaid: it chooses nothing.
  EXPECT_EQ(threads_of("OMP_NUM_THREADS=lots", "--threads 1", &err), "1\n");
  EXPECT_EQ(err.find("tfw: OMP_NUM_THREADS"), std::string::npos) << err;  // libgomp may say its own
  // `tfw run --jobs 2` splits the default between its runs: 4 / 2 each.
  const Result batch =
      capture(fmt::format("env OMP_NUM_THREADS=4 {} run {}/tests/data/tiny-experiment.toml --jobs 2 "
                          "--home {}/batch --only baseline",
                          TFW_BINARY, TFW_SOURCE_DIR, home));
  EXPECT_EQ(batch.code, 0) << batch.output;
  EXPECT_EQ(capture(fmt::format("sqlite3 {}/batch/runs.db \"SELECT json_extract(e.payload, '$.threads') FROM events e "
                                "JOIN runs r ON r.id = e.run_id WHERE r.name = 'baseline' AND e.kind = 'provenance'\"",
                                home))
                .out,
            "2\n");
}

}  // namespace test_threads
