// Issue 13: malformed input of every kind, end to end through the real tfw binary. Each case
// asserts its exit code and the words of its message; none may end in a signal, an abort
// or "terminate called", and the store of a home that holds a finished run must come out
// of every case intact (integrity_check ok, the run and its points still there).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/run_command.h"

namespace test_bad_input {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

// Per process: ctest runs each test in a process of its own, two at a time, and each sets the
// suite up; a shared folder was wiped by one while the other used it (tests then skipped).
const std::string kWork = "/tmp/tfw-test-bad-input-" + std::to_string(::getpid());
const std::string kHome = kWork + "/home";

// Runs a bash script with T (tfw), H (the shared home), W (a scratch folder) and M (the
// mini configs) set.
Result script(const std::string& body) {
  const std::string path = kWork + "/case.sh";
  std::ofstream(path) << "set -u\nT=" TFW_BINARY "\nH=" << kHome << "\nW=" << kWork
                      << "\nM=" TFW_SOURCE_DIR "/experiments/mini\ncd $W\n"
                      << body << "\n";
  return capture("bash " + path);
}

// The store's verdict on itself, and the finished run `base` with its points. (A run that
// starts and then fails on its data is recorded as failed: that is bookkeeping, not damage.)
std::string store_state() {
  return capture("sqlite3 " + kHome +
                 "/runs.db \"PRAGMA integrity_check; SELECT id, status, tokens FROM runs WHERE "
                 "name = 'base'; SELECT COUNT(*), SUM(value) FROM metrics WHERE run_id = "
                 "(SELECT id FROM runs WHERE name = 'base');\"")
      .output;
}

struct Case {
  const char* name;
  const char* body;
  int code;
  const char* message;  // a part of the output
};

// `good` is a copy of the tiny config; `exp` writes an experiment header. Configs are
// written with printf so that each case is one readable block.
const char* kPrelude = R"(
good() { cp $M/tiny-train-tokenformer.toml $W/$1.toml; }
exp() { printf '[experiment]\nname = "e"\n[defaults]\ndata = { corpus = "kjv" }\ntrain = { max_steps = 2 }\n' > $W/$1.toml; }
)";

const std::vector<Case> kCases = {
    // TOML and config values.
    {"syntax", "printf '[model\\nd = 1\\n' > bad.toml; $T train bad.toml --home $H", 2, "bad.toml:1"},
    {"empty file", ": > empty.toml; $T train empty.toml --home $H", 2, "empty.toml"},
    {"missing file", "$T train nowhere.toml --home $H", 2, "nowhere.toml"},
    {"a device as config", "$T train /dev/zero --home $H", 2, "'/dev/zero' is not a regular file"},
    {"a folder as config", "mkdir -p adir; $T train adir --home $H", 2, "'adir' is a folder, not a TOML file"},
    {"unknown key", "good c; $T train c.toml --home $H --set train.colour=1", 2, "colour"},
    {"wrong type", "good c; $T train c.toml --home $H --set train.max_steps='\"ten\"'", 2, "max_steps"},
    {"lr nan", "good c; $T train c.toml --home $H --set train.lr=nan", 2, "train.lr: must be a finite number"},
    {"lr inf", "good c; $T train c.toml --home $H --set train.lr=inf", 2, "train.lr: must be a finite number"},
    {"lr negative", "good c; $T train c.toml --home $H --set train.lr=-0.1", 2, "must be at least 0"},
    {"beta1 2.0", "good c; $T train c.toml --home $H --set train.beta1=2.0", 2, "beta1: must be in [0, 1)"},
    {"beta2 negative", "good c; $T train c.toml --home $H --set train.beta2=-0.5", 2, "beta2: must be in [0, 1)"},
    // Issue 50 (15): values that passed validation, then failed in torch with exit 1, or gave NaN
    // at step 0; and an evaluation that never ended.
    {"lr 1e300", "good c; $T train c.toml --home $H --set train.lr=1e300", 2, "train.lr: must be at most 100"},
    {"eval_batches 2^63-1", "good c; $T train c.toml --home $H --set train.eval_batches=9223372036854775807", 2,
     "train.eval_batches: must be at most 1000000"},
    {"rotary_base 0", "good c; $T train c.toml --home $H --set model.rotary_base=0", 2,
     "model.rotary_base: must be a finite number above 0, got 0"},
    {"rotary_base nan", "good c; $T train c.toml --home $H --set model.rotary_base=nan", 2,
     "model.rotary_base: must be a finite number above 0, got nan"},
    {"rotary_pct nan", "good c; $T train c.toml --home $H --set model.rotary_pct=nan", 2,
     "rotary_pct: must be in [0, 1]"},
    {"key_std -1", "good c; $T train c.toml --home $H --set model.init.key_std=-1", 2,
     "model.init.key_std: must be a finite number >= 0, got -1"},
    {"layernorm eps -1", "good c; $T train c.toml --home $H --set model.layernorm.eps=-1", 2,
     "model.layernorm.eps: must be a finite number above 0, got -1"},
    // Issue 51: mistakes that reached the compute, or left a record.
    {"misspelt required key", "good c; sed -i 's/^n_attn = 64/n_atn = 64/' c.toml; $T train c.toml --home $H", 2,
     "c.toml:9:1: unknown key 'model.n_atn', and model.n_attn is missing"},
    {"--set of a misspelt table", "good c; $T train c.toml --home $H --set modle.d=128", 2,
     "--set modle.d=128: unknown key 'modle'"},
    {"a corpus typo records nothing",
     "good c; $T train c.toml --home $H --name typo --set data.corpus=kvj; code=$?; "
     "echo records $(sqlite3 $H/runs.db \"SELECT COUNT(*) FROM runs WHERE name = 'typo'\"); exit $code",
     2, "records 0"},
    {"dry run of a corpus typo",
     "exp x; good c; printf '[runs.a]\\nconfig = \"c.toml\"\\ndata = { corpus = \"kvj\" }\\n' >> x.toml; "
     "$T run x.toml --dry-run --home $H",
     2, "x.toml: runs.a (run 'a'): unknown corpus 'kvj'"},
    {"a million seeds",
     "exp x; good c; printf '[runs.a]\\nconfig = \"c.toml\"\\nseeds = [%s]\\n' $(seq -s, 0 999999) >> x.toml; "
     "timeout 20 $T run x.toml --dry-run --home $H",
     2, "1000000 seeds, more than the limit of 4096 runs"},
    // Issue 50 (low, 12): a 5,000-stage chain ran past 60 s before the run limit was checked.
    {"a 5,000-stage chain",
     "exp x; good c; { printf '[runs.r0]\\nconfig = \"c.toml\"\\n'; for i in $(seq 1 4999); do printf "
     "'[runs.r%d]\\nparent = \"r%d\"\\ngrowth = { method = \"pattention_grow\" }\\n' $i $((i-1)); done; } "
     ">> x.toml; timeout 20 $T run x.toml --dry-run --home $H",
     2, "5000 [runs.*] entries, more than the limit of 4096 runs"},
    // Issue 33 (low): silently a 1-step run, or a growth that never happens.
    {"max_tokens 1e30", "good c; $T train c.toml --home $H --set train.max_steps=0 --set train.max_tokens=1e30", 2,
     "more than tfw can count (2^53)"},
    {"max_flops 1e300", "good c; $T train c.toml --home $H --set train.max_steps=0 --set train.max_flops=1e300", 2,
     "train.max_flops = 1e+300"},
    {"growth after the last step",
     "good c; printf '[[train.growth]]\\nat_step = 500\\nmethod = \"pattention_grow\"\\nto = { n_attn = 96 }\\n' >> "
     "c.toml; "
     "$T train c.toml --home $H --name late",
     2, "at_step = 500 is not before the run's last step"},
    {"growth_repeat every 0 steps",
     "good c; printf '[train.growth_repeat]\\nevery_steps = 0\\nmethod = \"pattention_grow\"\\n' >> c.toml; "
     "$T train c.toml --home $H --name never",
     2, "every_steps"},
    {"d zero", "good c; $T train c.toml --home $H --set model.d=0", 2, "model.d: must be positive"},
    {"d negative", "good c; $T train c.toml --home $H --set model.d=-64", 2, "must be positive"},
    {"d 1e9", "good c; $T train c.toml --home $H --set model.d=1000000000", 2, "larger than this tfw supports"},
    {"layers 1e8", "good c; $T train c.toml --home $H --set model.layers=100000000", 2,
     "larger than this tfw supports"},
    {"batch 1e8", "good c; $T train c.toml --home $H --set train.batch_size=100000000", 2,
     "larger than this tfw supports"},
    {"heads do not divide d", "good c; $T train c.toml --home $H --set model.heads=3", 2, "heads"},
    {"does not fit in memory",
     "good c; $T train c.toml --home $H --set model.d=1048576 --set model.n_ffn=1048576 --set model.layers=64", 2,
     "GB of memory to train"},
    {"device typo", "good c; $T train c.toml --home $H --set train.device='\"gpu\"'", 2,
     "train.device: \"gpu\" is not a device"},
    {"cuda on this machine", "good c; $T train c.toml --home $H --set train.device='\"cuda:1\"'", 2,
     "\"cuda:1\" asks for CUDA, but there is no CUDA device on this machine (tfw is built with LibTorch 2."},
    {"precision fp16", "good c; $T train c.toml --home $H --set train.precision='\"fp16\"'", 2, "precision"},
    {"no budget", "good c; sed -i '/max_steps/d' c.toml; $T train c.toml --home $H", 2, "c.toml: no training budget"},
    {"bad run name", "good c; $T train c.toml --home $H --name ../../escaped", 2, "is not a usable run name"},
    {"bad experiment name", "good c; $T train c.toml --home $H --experiment 'a;rm -rf x'", 2,
     "is not a usable experiment name"},
    {"missing corpus", "good c; $T train c.toml --home $H --set data.corpus='\"/nonexistent/x.txt\"'", 2,
     "unknown corpus"},
    {"corpus shorter than a window",
     "good c; printf 'tiny' > short.txt; $T train c.toml --home $H --name short --set data.corpus='\"short.txt\"'", 2,
     "short"},
    // Checkpoints.
    {"init-from a missing file", "good c; $T train c.toml --home $H --name x --init-from /nonexistent.pt", 2,
     "not found"},
    {"init-from random bytes with a forged manifest",
     "good c; mkdir -p f; head -c 5000 /dev/urandom > f/step-00000005.safetensors; "
     "printf 'format_version = 2\\narchive = \"step-00000005.safetensors\"\\nsize = %d\\ncrc32 = %d\\nstep = 5\\n' "
     "$(stat -c %s f/step-00000005.safetensors) $(python3 -c \"import "
     "zlib;print(zlib.crc32(open('f/step-00000005.safetensors','rb')"
     ".read()))\") > f/step-00000005.toml; $T train c.toml --home $H --name y --init-from f/step-00000005.safetensors",
     2, "not a valid safetensors file"},
    // Issue 33, finding 5: a checkpoint whose data is shorter than its tensors, with a manifest
    // that matches the shortened file; tfw eval computed a loss of nan on heap memory.
    {"a checkpoint shorter than its tensors",
     "mkdir -p short; cp $H/runs/base/checkpoints/step-00000006.safetensors short/step-00000006.safetensors; "
     "truncate -s -64 short/step-00000006.safetensors; "
     "printf 'format_version = 2\\narchive = \"step-00000006.safetensors\"\\nsize = %d\\ncrc32 = %d\\nstep = 6\\n' "
     "$(stat -c %s short/step-00000006.safetensors) $(python3 -c \"import zlib;print(zlib.crc32(open("
     "'short/step-00000006.safetensors','rb').read()))\") > short/step-00000006.toml; "
     "$T eval short/step-00000006.safetensors --windows 1 --home $H",
     2, "not a valid safetensors file"},
    {"init-from the other family",
     "$T train $M/tiny-transformer.toml --home $H --name other --set train.max_steps=2 --init-from "
     "$H/runs/base/checkpoints/step-00000006.safetensors",
     2, "does not fit the checkpoint"},
    {"resume with a config of the same family and another size",
     "good c; sed -i 's/^n_attn = 64$/n_attn = 96/' c.toml; grep -q '^n_attn = 96$' c.toml && "
     "$T train c.toml --resume base --home $H",
     2, "does not fit the checkpoint"},
    {"resume a missing run", "$T train --resume nosuchrun --home $H", 2, "not found"},
    {"resume with a model change", "$T train --resume base --home $H --set model.d=32", 2,
     "only train.* keys can change on resume"},
    {"resume with a new budget and no choice", "$T train --resume base --home $H --set train.max_steps=50", 2,
     "--extend keep"},
    {"resume with a bad --extend", "$T train --resume base --home $H --set train.max_steps=50 --extend maybe", 2,
     "expected keep or stretch"},
    // Stores.
    {"a store that is not SQLite", "mkdir -p s1; echo notes > s1/runs.db; $T runs list --home s1; cat s1/runs.db", 2,
     "is not a tfw store"},
    {"a store from a newer tfw", "mkdir -p s2; sqlite3 s2/runs.db 'PRAGMA user_version = 99'; $T runs list --home s2",
     2, "schema version 99"},
    {"a damaged store",
     "mkdir -p s3; cp $H/runs.db s3/; sqlite3 s3/runs.db 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null; "
     "python3 -c \"f=open('s3/runs.db','r+b');f.seek(4096);f.write(bytes((i*31+7)%256 for i in "
     "range(__import__('os').path.getsize('s3/runs.db')-4096)))\"; $T runs list --home s3",
     2, "hint: the store file is damaged"},
    {"runs delete of a missing run", "$T runs delete nosuchrun --home $H", 2, "no run 'nosuchrun'"},
    // Experiments.
    {"experiment parents in a cycle",
     "exp x; printf '[runs.a]\\nparent = \"b\"\\ngrowth = { method = \"pattention_grow\" }\\n[runs.b]\\nparent = "
     "\"a\"\\ngrowth = { method = \"pattention_grow\" }\\n' >> x.toml; $T run x.toml --dry-run --home $H",
     2, "cycle"},
    {"experiment with a missing parent",
     "exp x; printf '[runs.a]\\nfamily = \"tokenformer\"\\nconfig = \"c.toml\"\\n[runs.b]\\nparent = \"zz\"\\n"
     "growth = { method = \"pattention_grow\" }\\n' >> x.toml; good c; $T run x.toml --dry-run --home $H",
     2, "'zz' is not a run of this experiment"},
    {"experiment extends itself",
     "printf '[experiment]\\nextends = \"x.toml\"\\n[runs.a]\\n' > x.toml; $T run x.toml --dry-run --home $H", 2,
     "cycle"},
    {"experiment with an empty grid",
     "exp x; good c; printf '[runs.a]\\nconfig = \"c.toml\"\\ngrid = { \"train.lr\" = [] }\\n' >> x.toml; "
     "$T run x.toml --dry-run --home $H",
     2, "x.toml:8:23: runs.a.grid.train.lr: expected a non-empty array"},
    {"experiment grid of a million runs",
     "exp x; good c; printf '[runs.a]\\nconfig = \"c.toml\"\\ngrid = { \"train.lr\" = [%s], \"train.seed\" = [%s] "
     "}\\n' "
     "$(seq -s, 1 1000) $(seq -s, 1 1000) >> x.toml; timeout 20 $T run x.toml --dry-run --home $H",
     2, "1000000 runs"},
    {"experiment run name that escapes",
     "exp x; good c; printf '[runs.\"../../../ESCAPED\"]\\nconfig = \"c.toml\"\\n' >> x.toml; "
     "$T run x.toml --dry-run --home $H; ls $W/../ESCAPED* 2>&1",
     2, "is not a usable run name"},
    {"experiment grid value that escapes",
     "exp x; good c; printf '[runs.a]\\nconfig = \"c.toml\"\\ngrid = { \"data.corpus\" = [\"../../etc/passwd\"] }\\n' "
     ">> x.toml; $T run x.toml --dry-run --home $H",
     2, "is not a usable run name"},
    {"experiment without a budget names the run",
     "printf '[experiment]\\nname = \"e\"\\n[runs.nobudget]\\nconfig = \"c.toml\"\\n' > x.toml; good c; "
     "sed -i '/max_steps/d' c.toml; $T run x.toml --dry-run --home $H",
     2, "runs.nobudget (run 'nobudget'): no training budget"},
    {"experiment with no runs", "exp x; $T run x.toml --dry-run --home $H", 2, "no runs"},
};

class BadInput : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { std::filesystem::remove_all(kWork); }
  static void SetUpTestSuite() {
    fs::remove_all(kWork);
    fs::create_directories(kWork);
    Result base = script(
        "$T train $M/tiny-train-tokenformer.toml --home $H --name base --set train.max_steps=6 "
        "--set train.checkpoint_every=3 --set train.eval_every=3");
    ASSERT_EQ(base.code, 0) << base.output;
  }
};

TEST_F(BadInput, EachMalformedInputGetsItsExitCodeAndMessageAndTheStoreStaysIntact) {
  const std::string before = store_state();
  ASSERT_EQ(before.substr(0, 3), "ok\n") << before;
  ASSERT_GE(kCases.size(), 30u);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    Result run = script(std::string(kPrelude) + c.body);
    // A case's script may run a command after tfw (cat, ls): look for tfw's own code in
    // the output of the shell's last command only when the case says so; here every case
    // ends with the tfw command or with a check whose output is asserted below.
    EXPECT_NE(run.output.find(c.message), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("terminate called"), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("Aborted"), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("Exception raised from"), std::string::npos) << run.output;  // a torch trace
    EXPECT_EQ(store_state(), before) << "the store changed";
    if (std::string(c.name) == "a store that is not SQLite") {
      EXPECT_NE(run.output.find("notes"), std::string::npos) << "the file was modified";
    } else if (std::string(c.name) == "experiment run name that escapes") {
      EXPECT_NE(run.output.find("No such file"), std::string::npos) << "something was written outside";
    } else {
      EXPECT_EQ(run.code, c.code) << run.output;
    }
  }
}

// A damaged newest checkpoint: resume says which and why, moves it aside, continues from
// the newest valid one; with none valid, a clear error. Its hint no longer promises what
// the code does not do.
TEST_F(BadInput, DamagedCheckpointsAreSkippedOutLoudOnResume) {
  Result copy = script(
      "rm -rf $W/h2; mkdir -p $W/h2; $T train $M/tiny-train-tokenformer.toml --home $W/h2 --name r "
      "--set train.max_steps=9 --set train.checkpoint_every=3 --set train.keep_checkpoints=5");
  ASSERT_EQ(copy.code, 0) << copy.output;
  const std::string dir = kWork + "/h2/runs/r/checkpoints/";
  // Step 9: a flipped byte; step 6: a manifest that lies about its step.
  Result damage = script("printf '\\xff' | dd of=" + dir +
                         "step-00000009.safetensors bs=1 seek=2000 conv=notrunc 2>/dev/null; "
                         "sed -i 's/^step = 6/step = 3/' " +
                         dir + "step-00000006.toml");
  ASSERT_EQ(damage.code, 0) << damage.output;
  Result resumed = script("$T train --resume r --home $W/h2 --extend keep --set train.max_steps=10");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("skipped a damaged checkpoint"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("step-00000009.safetensors' is corrupt: its CRC-32 does not match"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("step-00000006.safetensors' has a manifest that does not match it (archive "
                                "'step-00000006.safetensors', step 3)"),
            std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("step-00000003.safetensors at step 3"), std::string::npos) << resumed.output;
  EXPECT_TRUE(fs::exists(dir + "step-00000009.safetensors.damaged"));
  EXPECT_EQ(resumed.output.find("picks the last valid one"), std::string::npos) << resumed.output;
  // Every checkpoint damaged: nothing to resume, said plainly.
  Result all = script("for f in " + dir +
                      "step-*.safetensors; do printf '\\xff' | dd of=$f bs=1 seek=100 conv=notrunc "
                      "2>/dev/null; done; $T train --resume r --home $W/h2");
  EXPECT_EQ(all.code, 2) << all.output;
  EXPECT_NE(all.output.find("holds no valid checkpoint"), std::string::npos) << all.output;
}

// A run that never checkpointed keeps no claim on its name: started again, it replaces its
// record. `tfw runs delete` removes a record (and with --files its folder).
TEST_F(BadInput, ARunThatNeverCheckpointedCanBeStartedAgainAndRunsCanBeDeleted) {
  Result failed = script(
      "printf 'tiny' > short.txt; $T train $M/tiny-train-tokenformer.toml --home $W/h3 --name again "
      "--set data.corpus='\"short.txt\"'");
  EXPECT_EQ(failed.code, 2) << failed.output;
  Result resume = script("$T train --resume again --home $W/h3");
  EXPECT_EQ(resume.code, 2) << resume.output;
  EXPECT_NE(resume.output.find("start it again with `tfw train CONFIG --name NAME`"), std::string::npos)
      << resume.output;
  Result again = script("$T train $M/tiny-train-tokenformer.toml --home $W/h3 --name again --set train.max_steps=3");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("never wrote a checkpoint: starting it again replaces its record"), std::string::npos)
      << again.output;
  Result listed = script("sqlite3 $W/h3/runs.db \"SELECT name, status FROM runs\"");
  EXPECT_EQ(listed.out, "again|finished\n");
  Result removed = script(
      "$T runs delete again --files --home $W/h3; ls $W/h3/runs; "
      "sqlite3 $W/h3/runs.db \"SELECT COUNT(*) FROM runs; SELECT COUNT(*) FROM metrics\"");
  EXPECT_NE(removed.output.find("deleted run 1 'again' (default); its folder"), std::string::npos) << removed.output;
  EXPECT_NE(removed.output.find("was removed\n0\n0\n"), std::string::npos) << removed.output;
}

// A home copied elsewhere resumes its runs in the copy: the store keeps paths relative.
TEST_F(BadInput, ACopiedHomeResumesInTheCopy) {
  Result run = script(
      "rm -rf $W/h4 $W/h4-copy; $T train $M/tiny-train-tokenformer.toml --home $W/h4 --name r "
      "--set train.max_steps=6 --set train.checkpoint_every=3 && cp -r $W/h4 $W/h4-copy && "
      "$T train --resume r --home $W/h4-copy --extend keep --set train.max_steps=9 && "
      "echo ORIGINAL; ls $W/h4/runs/r/checkpoints; echo COPY; ls $W/h4-copy/runs/r/checkpoints");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("resumed " + kWork + "/h4-copy/runs/r/checkpoints/step-00000006.safetensors"),
            std::string::npos)
      << run.output;
  // The original has no step 9; the copy does.
  const std::string original = run.output.substr(run.output.rfind("ORIGINAL"));
  const std::string copy = original.substr(original.find("COPY"));
  EXPECT_EQ(original.substr(0, original.find("COPY")).find("step-00000009"), std::string::npos) << original;
  EXPECT_NE(copy.find("step-00000009.safetensors"), std::string::npos) << original;
}

}  // namespace test_bad_input

namespace test_bad_input {

// Issue 33, finding 1: a checkpoint whose TorchScript `__setstate__` overwrites a marker file
// when a TorchScript loader loads it (the script checks that Python's torch.jit.load does run
// it). Through every command that reads a checkpoint, as an old .pt (version-1 manifest) and
// renamed to .safetensors (a forged version-2 manifest), the marker stays as it was.
TEST_F(BadInput, ACheckpointThatRunsCodeWhenLoadedRunsNothing) {
  // Both hostile archives (legacy format 1 and format 2) are crafted in one Python process,
  // and PyTorch's own TorchScript loader, in that process, shows each runs its code when loaded.
  const std::string scripts = TFW_SOURCE_DIR "/tests/reference/";
  std::string python = std::string(TFW_PYTHON) + " " + scripts + "run_many.py";
  for (const char* version : {"1", "2"}) {
    python += fmt::format(" :: {}code_running_checkpoint.py v{}/step-00000005.pt $W/evil/marker {}", scripts, version,
                          version);
  }
  for (const char* version : {"1", "2"}) {
    python += fmt::format(" :: {}load_torchscript.py v{}/step-00000005.pt $W/evil/marker", scripts, version);
  }
  Result made = script("set -e; rm -rf $W/evil; mkdir -p $W/evil/v1 $W/evil/v2; cd $W/evil; " + python +
                       "; $T train $M/tiny-train-tokenformer.toml --home $W/evil/home --name r "
                       "--set train.max_steps=3 >/dev/null");
  ASSERT_EQ(made.code, 0) << made.output;
  for (const char* probe : {"v1/step-00000005.pt: 00 00 82 42", "v2/step-00000005.pt: 00 00 82 42"}) {
    ASSERT_NE(made.output.find(probe), std::string::npos) << "the archive did not run its code: " << made.output;
  }
  const std::vector<std::pair<std::string, int>> versions = {{"pt", 1}, {"safetensors", 2}};
  for (const auto& [extension, version] : versions) {
    // The run's checkpoints are replaced by the hostile one.
    const std::string dir = "$W/evil/home/runs/r/checkpoints", file = dir + "/step-00000005." + extension;
    Result run =
        script("cd $W/evil; printf '%032d' 0 > marker; rm -f " + dir + "/*; cp v" + std::to_string(version) + "/* " +
               dir + "; if [ " + extension + " = safetensors ]; then mv " + dir + "/step-00000005.pt " + file +
               "; sed -i 's/step-00000005.pt/step-00000005.safetensors/' " + dir +
               "/step-00000005.toml; fi; "
               "$T eval " +
               file +
               " --windows 1 --home $W/evil/home; echo \"eval=$?\"; "
               "$T train $M/tiny-train-tokenformer.toml --home $W/evil/home --name x --init-from " +
               file +
               "; echo \"init=$?\"; "
               "$T train --resume r --home $W/evil/home --extend keep --set train.max_steps=9; echo \"resume=$?\"; "
               "$T sample " +
               file +
               " --tokens 2 --home $W/evil/home; echo \"sample=$?\"; "
               "$T checkpoints upgrade " +
               file +
               " --home $W/evil/home; echo \"upgrade=$?\"; "
               "cat marker; echo");
    for (const char* command : {"eval=2", "init=2", "resume=2", "sample=2", "upgrade=2"}) {
      EXPECT_NE(run.output.find(command), std::string::npos) << extension << ": " << command << "\n" << run.output;
    }
    EXPECT_NE(run.output.find(version == 1 ? "tfw checkpoints upgrade" : "not a valid safetensors file"),
              std::string::npos)
        << run.output;
    if (version == 1) {  // the upgrade read it as data and found no tfw checkpoint in it
      EXPECT_NE(run.output.find("the legacy checkpoint lacks"), std::string::npos) << run.output;
    }
    EXPECT_NE(run.output.find(std::string(32, '0')), std::string::npos) << "the marker changed: " << run.output;
    EXPECT_EQ(run.output.find("Segmentation"), std::string::npos) << run.output;
  }
}

}  // namespace test_bad_input

namespace test_bad_input {

// Issue 33 (low): `tfw data prepare` on a full disk left train.bin.tmpPID files behind, and
// each retry added more. A file-size limit stands in for the full disk (the writes fail with
// EFBIG, as with ENOSPC); then a retry with room succeeds and leaves nothing either.
TEST_F(BadInput, DataPrepareOnAFullDiskLeavesNoTemporaryFiles) {
  Result full = script(
      "rm -rf $W/fd; for attempt in 1 2; do (ulimit -f 64; trap '' XFSZ; "
      "$T data prepare kjv --home $W/fd); echo \"code=$?\"; done; "
      "echo \"left=$(find $W/fd -name '*.tmp*' | wc -l)\"");
  EXPECT_NE(full.output.find("code=1"), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("disk full"), std::string::npos) << full.output;
  EXPECT_NE(full.output.find("left=0"), std::string::npos) << full.output;
  EXPECT_EQ(full.output.find("code=0"), std::string::npos) << full.output;
  Result room = script(
      "$T data prepare kjv --home $W/fd >/dev/null; echo \"code=$?\"; "
      "echo \"left=$(find $W/fd -name '*.tmp*' | wc -l)\"; ls $W/fd/data/*/");
  EXPECT_NE(room.output.find("code=0\nleft=0\n"), std::string::npos) << room.output;
  EXPECT_NE(room.output.find("train.bin"), std::string::npos) << room.output;
}

}  // namespace test_bad_input
