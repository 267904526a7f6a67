// Growth by script end to end with the real binary and the venv's Python: the two example
// scripts of examples/growth/ grow what their built-in twins grow, bit for bit; a script that
// breaks the protocol (a false exact claim, a missing or misshapen tensor, no declaration, a
// failure, a hang) gets an error that names the problem; an experiment grows a stage by script,
// records the script's path and SHA-256, and refuses to skip the stage once the script changed.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_command.h"
#include "tests/cli/trained_once.h"

namespace test_growth_script {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

const std::string kSource = TFW_SOURCE_DIR;
const std::string kMini = kSource + "/experiments/mini/";
const std::string kExamples = kSource + "/examples/growth/";
// The scripts run with the Python the tests use (the venv's: numpy, torch, safetensors).
const std::string kEnv = std::string("TFW_PYTHON=") + TFW_PYTHON + " ";

Result tfw(const std::string& arguments, const std::string& environment = "") {
  return capture(kEnv + environment + TFW_BINARY " " + arguments);
}

// Two small parents, trained 2 steps each: a Tokenformer and a Transformer (L 2, d 64).
const std::string kParents =
    "set -e\n" TFW_BINARY " train " + kMini + "growth-tokenformer-small.toml --name tokenformer --home $H" +
    " --set train.max_steps=2 --set train.eval_batches=1 --set train.batch_size=2 > /dev/null\n" TFW_BINARY " train " +
    kMini + "growth-transformer-small.toml --name transformer --home $H" +
    " --set train.max_steps=2 --set train.eval_batches=1 --set train.batch_size=2 > /dev/null\n";

// A home holding both parents; returns the checkpoint of `run`.
std::string parent_checkpoint(const std::string& home, const std::string& run) {
  const std::string failure = tfw::test::trained_home(kParents, home);
  EXPECT_EQ(failure, "");
  for (const auto& entry : fs::recursive_directory_iterator(home)) {
    const std::string path = entry.path().string();
    if (path.find("/" + run + "/") != std::string::npos && entry.path().extension() == ".safetensors" &&
        path.find("checkpoints") != std::string::npos)
      return path;
  }
  return "";
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The model tensors of a grown checkpoint as `tfw export-model` writes them: a deterministic
// file, so two checkpoints with bit-identical tensors export to identical bytes.
std::string exported(const std::string& grown_dir, const std::string& out) {
  Result e = tfw("export-model " + grown_dir + "/step-00000000.safetensors --out " + out);
  EXPECT_EQ(e.code, 0) << e.output;
  return read(out + "/model.safetensors");
}

// Grows `parent` twice with the same arguments `to`: with the built-in `method`, and with the
// example `script` (and `script_extra`). Returns the script's run and both grown models' exports.
struct Twins {
  Result script;
  std::string builtin_tensors, script_tensors;
};
Twins grow_twins(const std::string& home, const std::string& parent, const std::string& method,
                 const std::string& script, const std::string& to, const std::string& script_extra) {
  Twins twins;
  const Result builtin = tfw("grow --method " + method + " --from " + parent + to + " --out " + home + "/builtin");
  EXPECT_EQ(builtin.code, 0) << builtin.output;
  twins.script = tfw("grow --method script --script " + kExamples + script + " --from " + parent + to + " --out " +
                     home + "/script --json " + script_extra);
  EXPECT_EQ(twins.script.code, 0) << twins.script.output;
  twins.builtin_tensors = exported(home + "/builtin", home + "/builtin-export");
  twins.script_tensors = exported(home + "/script", home + "/script-export");
  return twins;
}

TEST(GrowthScript, TheZeroInitExampleGrowsWhatPattentionGrowGrowsBitForBit) {
  const std::string home = "/tmp/tfw-test-growth-script-zero";
  const std::string parent = parent_checkpoint(home, "tokenformer");
  ASSERT_NE(parent, "");
  const std::string to = " --to " + kMini + "growth-tokenformer-large.toml --seed 7 --home " + home;
  const Twins twins = grow_twins(home, parent, "pattention_grow", "zero_init_pattention.py", to, "");
  const Result& script = twins.script;
  ASSERT_EQ(script.code, 0);
  const nlohmann::json g = nlohmann::json::parse(script.out);
  EXPECT_EQ(g["method"], "script");
  EXPECT_TRUE(g["declared_exact"].is_null()) << script.out;  // the script declares it as it runs
  // The script's own output is shown, and its exact claim was checked.
  EXPECT_NE(script.err.find("[zero_init_pattention.py]"), std::string::npos) << script.err;
  EXPECT_NE(script.err.find("declared exact; checked: max |logit difference|"), std::string::npos) << script.err;
  ASSERT_GT(twins.builtin_tensors.size(), 100000u);
  EXPECT_TRUE(twins.builtin_tensors == twins.script_tensors)
      << "the script's grown tensors differ from pattention_grow's";
  // The lineage is a built-in's: the parent run, the method, and the script pinned by content.
  Result show = tfw("train " + kMini + "growth-tokenformer-large.toml --init-from " + home +
                    "/script/step-00000000.safetensors --name grown --home " + home +
                    " --set train.max_steps=1 --set train.eval_batches=1 --set train.batch_size=2 --json");
  ASSERT_EQ(show.code, 0) << show.output;
  Result record = tfw("runs show grown --json --home " + home);
  ASSERT_EQ(record.code, 0) << record.output;
  const nlohmann::json run = nlohmann::json::parse(record.out);
  EXPECT_EQ(run["growth_method"], "script");
  const std::string options = run["growth_options"];
  const std::string digest = capture("sha256sum " + kExamples + "zero_init_pattention.py | cut -c1-64").out;
  ASSERT_EQ(digest.size(), 65u);
  EXPECT_NE(options.find(digest.substr(0, 64)), std::string::npos) << options;
  EXPECT_NE(options.find(kExamples + "zero_init_pattention.py"), std::string::npos) << options;
}

TEST(GrowthScript, TheHyperCloningExampleGrowsWhatHypercloningGrowsBitForBit) {
  const std::string home = "/tmp/tfw-test-growth-script-hc";
  const std::string parent = parent_checkpoint(home, "transformer");
  ASSERT_NE(parent, "");
  const std::string to = " --to " + kMini + "growth-transformer-large.toml --option noise=false --home " + home;
  const Twins twins =
      grow_twins(home, parent, "hypercloning", "hypercloning.py", to, "--check --set train.eval_batches=1");
  const Result& script = twins.script;
  ASSERT_EQ(script.code, 0);
  const nlohmann::json g = nlohmann::json::parse(script.out);
  EXPECT_LT(g["max_abs_logit_diff"].get<double>(), 1e-4);  // --check, on validation text
  EXPECT_NE(script.err.find("width x2, heads x2, FFN width x2"), std::string::npos) << script.err;
  ASSERT_GT(twins.builtin_tensors.size(), 100000u);
  EXPECT_TRUE(twins.builtin_tensors == twins.script_tensors) << "the script's grown tensors differ from hypercloning's";
}

// A script in the test's folder, from Python source.
std::string script_file(const std::string& home, const std::string& name, const std::string& source) {
  const std::string path = home + "/" + name;
  std::ofstream(path)
      << "import argparse, json, sys, time\nimport numpy as np\n"
      << "from safetensors.numpy import load_file, save_file\n"
      << "p = argparse.ArgumentParser()\n"
      << "for f in ('--parent', '--from', '--to', '--options', '--out', '--seed'):\n"
      << "    p.add_argument(f)\n"
      << "a = p.parse_args()\n"
      << "target = json.load(open(a.to))\n"
      << "def fill(value):\n"
      << "    kinds = {'F32': np.float32, 'F64': np.float64, 'I64': np.int64}\n"
      << "    return {n: np.full(t['shape'], value, dtype=kinds[t['dtype']]) for n, t in target['tensors'].items()}\n"
      << source;
  return path;
}

TEST(GrowthScript, AScriptThatBreaksTheProtocolGetsAnErrorNamingWhat) {
  const std::string home = "/tmp/tfw-test-growth-script-bad";
  const std::string parent = parent_checkpoint(home, "tokenformer");
  ASSERT_NE(parent, "");
  // A failed growth keeps its folder for a look: under the test's home (TMPDIR), not /tmp.
  fs::create_directories(home + "/tmp");
  auto grow = [&](const std::string& script, const std::string& extra = "") {
    return tfw("grow --method script --script " + script + " --from " + parent + " --to " + kMini +
                   "growth-tokenformer-large.toml --out " + home + "/out " + extra + " --home " + home,
               "TMPDIR=" + home + "/tmp ");
  };
  struct Case {
    std::string name, source, expected;
  };
  const std::vector<Case> cases = {
      // Every tensor present, but not the parent's function: the exact claim is measured and refused.
      {"liar.py", "save_file(fill(0.5), a.out)\nprint(json.dumps({'exact': True}))\n",
       "declared the growth exact, but the grown model's logits differ from the parent's by up to"},
      {"missing.py",
       "t = fill(0.0)\ndel t['layers.1.ffn.values']\nsave_file(t, a.out)\nprint(json.dumps({'exact': False}))\n",
       "holds no tensor 'layers.1.ffn.values'"},
      {"shape.py",
       "t = fill(0.0)\nt['embedding'] = np.zeros((3, 3), np.float32)\nsave_file(t, a.out)\n"
       "print(json.dumps({'exact': False}))\n",
       "embedding has shape [3, 3] in the file, [256, 64] in the model"},
      {"dtype.py",
       "t = fill(0.0)\nt['layers.0.q.values'] = t['layers.0.q.values'].astype(np.float64)\nsave_file(t, a.out)\n"
       "print(json.dumps({'exact': False}))\n",
       "layers.0.q.values is F64 in the file, the model holds it as F32"},
      {"nan.py",
       "t = fill(0.0)\nt['layers.0.o.values'][1, 2] = np.nan\nsave_file(t, a.out)\nprint(json.dumps({'exact': "
       "False}))\n",
       "wrote 1 non-finite value (NaN or infinite) in layers.0.o.values"},
      {"silent.py", "save_file(fill(0.0), a.out)\n", "printed no declaration of exactness"},
      {"fails.py", "print('about to fail', flush=True)\nsys.exit(3)\n", "failed: exit code 3"},
      {"nothing.py", "print(json.dumps({'exact': False}))\n", "exited without writing the grown model"},
  };
  auto runs_in_store = [&] { return nlohmann::json::parse(tfw("runs list --json --home " + home).out)["runs"].size(); };
  const std::size_t runs_before = runs_in_store();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result r = grow(script_file(home, c.name, c.source));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(home + "/out/step-00000000.safetensors"));
    EXPECT_NE(r.err.find("kept in " + home + "/tmp/tfw-grow-"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("tfw train --resume"), std::string::npos) << r.err;  // a checkpoint reader's hint
    EXPECT_EQ(r.err.find("another version of the model family"), std::string::npos) << r.err;
  }
  EXPECT_EQ(runs_in_store(), runs_before);  // nothing recorded
  // The script's output is shown, tagged with its name.
  Result fails = grow(home + "/fails.py");
  EXPECT_NE(fails.err.find("[fails.py] about to fail"), std::string::npos) << fails.err;
  // A hang is stopped at its time limit.
  const std::string sleeper = script_file(home, "sleeper.py", "time.sleep(60)\n");
  const auto start = std::chrono::steady_clock::now();
  Result hang = grow(sleeper, "--option timeout_seconds=1");
  EXPECT_EQ(hang.code, 2) << hang.output;
  EXPECT_NE(hang.err.find("ran past its time limit of 1 s"), std::string::npos) << hang.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  // No script, or one that is not there: refused before anything runs.
  Result none = tfw("grow --method script --from " + parent + " --to " + kMini +
                    "growth-tokenformer-large.toml --out " + home + "/out --home " + home);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("needs the script to run"), std::string::npos) << none.err;
  Result absent = grow(home + "/no-such-script.py");
  EXPECT_EQ(absent.code, 2);
  EXPECT_NE(absent.err.find("no-such-script.py' does not exist"), std::string::npos) << absent.err;
}

TEST(GrowthScript, AnExperimentGrowsAStageByScriptAndRefusesToSkipItOnceTheScriptChanged) {
  const std::string home = "/tmp/tfw-test-growth-script-experiment";
  fs::remove_all(home);
  fs::create_directories(home + "/work");
  fs::copy_file(kExamples + "zero_init_pattention.py", home + "/work/grow.py");
  std::ofstream(home + "/work/experiment.toml")
      << "[experiment]\nname = \"scripted\"\nseeds = [1]\n\n"
      << "[runs.small]\nconfig = \"" << kMini << "growth-tokenformer-small.toml\"\n"
      << "train = { max_steps = 2, eval_batches = 1, batch_size = 2 }\n\n"
      << "[runs.grown]\nconfig = \"" << kMini << "growth-tokenformer-large.toml\"\nparent = \"small\"\n"
      << "growth = { method = \"script\", script = \"grow.py\", options = { value_std = 0.01 } }\n"
      << "train = { max_steps = 2, eval_batches = 1, batch_size = 2 }\n";
  Result run = tfw("run " + home + "/work/experiment.toml --home " + home);
  ASSERT_EQ(run.code, 0) << run.output;
  Result record = tfw("runs show grown-s1 --json --home " + home);  // the stage of seed 1
  ASSERT_EQ(record.code, 0) << record.output;
  const nlohmann::json grown = nlohmann::json::parse(record.out);
  EXPECT_EQ(grown["growth_method"], "script");
  const std::string options = grown["growth_options"];
  const std::string digest = capture("sha256sum " + home + "/work/grow.py | cut -c1-64").out.substr(0, 64);
  EXPECT_NE(options.find(digest), std::string::npos) << options;
  EXPECT_NE(options.find("value_std = 0.01"), std::string::npos) << options;
  EXPECT_NE(options.find(home + "/work/grow.py"), std::string::npos) << options;
  // Run again: nothing to do.
  Result again = tfw("run " + home + "/work/experiment.toml --home " + home);
  ASSERT_EQ(again.code, 0) << again.output;
  // The script changes: the finished stage is not skipped as if it had grown with the new one.
  std::ofstream(home + "/work/grow.py", std::ios::app) << "# a changed line\n";
  Result changed = tfw("run " + home + "/work/experiment.toml --home " + home);
  EXPECT_EQ(changed.code, 2) << changed.output;
  EXPECT_NE(changed.err.find("grown"), std::string::npos) << changed.err;
  EXPECT_NE(changed.err.find("script_sha256"), std::string::npos) << changed.err;
}

// Inside a run: a growth event by script, its path read from the run file's folder.
TEST(GrowthScript, AGrowthEventInsideARunRunsTheScriptNamedBesideTheRunFile) {
  const std::string home = "/tmp/tfw-test-growth-script-event";
  fs::remove_all(home);
  fs::create_directories(home + "/work");
  fs::copy_file(kExamples + "zero_init_pattention.py", home + "/work/grow.py");
  std::ofstream(home + "/work/run.toml") << read(kMini + "growth-tokenformer-small.toml")
                                         << "\n[[train.growth]]\nat_step = 2\nmethod = \"script\"\n"
                                         << "to = { n_attn = 96 }\noptions = { script = \"grow.py\" }\n";
  // From another folder: the script is found beside the run file, not in the working folder.
  Result run = tfw("train " + home + "/work/run.toml --name evented --json --home " + home +
                   " --set train.max_steps=4 --set train.eval_batches=1 --set train.batch_size=2");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.err.find("[grow.py]"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("declared exact; checked"), std::string::npos) << run.err;
  const nlohmann::json summary = nlohmann::json::parse(run.out);
  Result config = tfw("runs show evented --json --home " + home);
  ASSERT_EQ(config.code, 0) << config.output;
  const std::string stored = nlohmann::json::parse(config.out)["config"];
  const std::string digest = capture("sha256sum " + home + "/work/grow.py | cut -c1-64").out.substr(0, 64);
  EXPECT_NE(stored.find(home + "/work/grow.py"), std::string::npos) << stored;
  EXPECT_NE(stored.find(digest), std::string::npos) << stored;
  // The grown model trained on: the last checkpoint holds 96 attention tokens a layer.
  Result exported = tfw("export-model " + summary["last_checkpoint"].get<std::string>() + " --out " + home + "/export");
  ASSERT_EQ(exported.code, 0) << exported.output;
  const nlohmann::json model = nlohmann::json::parse(read(home + "/export/config.json"))["model"];
  EXPECT_EQ(model["n_attn"].get<std::int64_t>(), 96);
  EXPECT_EQ(model["n_ffn"].get<std::int64_t>(), 256);
  // [train.growth_repeat] pins its script the same way.
  std::ofstream(home + "/work/repeat.toml")
      << read(kMini + "growth-tokenformer-small.toml") << "\n[train.growth_repeat]\nevery_steps = 2\nadd_attn = 16\n"
      << "method = \"script\"\noptions = { script = \"grow.py\" }\n";
  Result repeat = tfw("train " + home + "/work/repeat.toml --name repeated --home " + home +
                      " --set train.max_steps=4 --set train.eval_batches=1 --set train.batch_size=2");
  ASSERT_EQ(repeat.code, 0) << repeat.output;
  const std::string repeated = nlohmann::json::parse(tfw("runs show repeated --json --home " + home).out)["config"];
  EXPECT_NE(repeated.find(digest), std::string::npos) << repeated;
}

}  // namespace test_growth_script
