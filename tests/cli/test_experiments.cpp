// Experiment files end to end with the real binary: every file in experiments/ parses and
// dry-runs; error cases name file:line:col; a tiny experiment (two stages with a growth and
// a baseline) runs, is skipped when run again, and exports md, csv and latex with the
// store's numbers; a batch stopped with SIGTERM resumes where it stopped.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_command.h"

namespace test_experiments {

namespace fs = std::filesystem;

using Output = tfw::test::Result;

Output shell(const std::string& command) { return tfw::test::capture(command); }

Output tfw(const std::string& arguments) { return shell(TFW_BINARY " " + arguments); }
Output tfw_stdout(const std::string& arguments) { return shell(TFW_BINARY " " + arguments + " 2>/dev/null"); }

const std::string kSource = TFW_SOURCE_DIR;

bool is_experiment(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[experiment]", 0) == 0 || line.rfind("[runs.", 0) == 0) return true;
  }
  return false;
}

TEST(Experiments, EveryShippedFileParsesAndDryRuns) {
  int experiments = 0, configs = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSource + "/experiments")) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    if (is_experiment(entry.path())) {
      Output plan = tfw_stdout("run --dry-run --json " + entry.path().string() + " --home /tmp/tfw-test-dryrun");
      nlohmann::json json = nlohmann::json::parse(plan.out);
      // The plan is printed either way; a run whose data or device is not on this machine is
      // a problem the dry run names (exit 2). Only the paper's corpora (openwebtext, enwik8),
      // which no machine of ours holds, may be missing; and for the GPU files, a CUDA device
      // and their corpus, which scripts/e1-gpu prepares on the GPU machine.
      const bool gpu_file = entry.path().parent_path().filename() == "gpu";
      if (plan.code == 2) {
        ASSERT_FALSE(json["problems"].empty()) << plan.output;
        for (const auto& problem : json["problems"]) {
          const std::string text = problem.get<std::string>();
          EXPECT_TRUE(text.find("unknown corpus 'openwebtext'") != std::string::npos ||
                      text.find("unknown corpus 'enwik8'") != std::string::npos ||
                      (gpu_file && (text.find("asks for CUDA") != std::string::npos ||
                                    text.find("unknown corpus 'pytorch-py'") != std::string::npos)))
              << text;
        }
      } else {
        ASSERT_EQ(plan.code, 0) << plan.output;
        EXPECT_TRUE(json["problems"].empty());
      }
      EXPECT_FALSE(json["runs"].empty());
      for (const auto& run : json["runs"]) {
        EXPECT_GT(run["parameters"].get<std::int64_t>(), 0);
        EXPECT_GE(run["cumulative_flops"].get<double>(), run["training_flops"].get<double>());
      }
      ++experiments;
    } else {
      Output params = tfw("params --json " + entry.path().string());
      EXPECT_EQ(params.code, 0) << params.output;
      ++configs;
    }
  }
  EXPECT_GE(experiments, 8);  // quickstart, 4 mini, 3 paper
  EXPECT_GE(configs, 16);
}

// Issue 49: the 124M config's vocabulary (50,304) with GPT-2's tokenizer (50,257): 47 padded ids,
// 47 × 768 = 36,096 parameters and 2 × 47 × 768 = 72,192 logit FLOPs per token that no token
// uses; with no tokenizer named, nothing is said.
TEST(Experiments, ParamsSaysWhatAPaddedVocabularyAdds) {
  const std::string config = kSource + "/experiments/paper/tokenformer-scaling-124m.toml";
  Output named = tfw_stdout("params --json " + config + " --set data.tokenizer=gpt2");
  ASSERT_EQ(named.code, 0) << named.output;
  const nlohmann::json padding = nlohmann::json::parse(named.out)["vocab_padding"];
  EXPECT_EQ(padding["tokenizer_vocab"], 50257);
  EXPECT_EQ(padding["padded_ids"], 47);
  EXPECT_EQ(padding["parameters"], 36096);
  EXPECT_EQ(padding["flops_per_token"], 72192);
  Output text = tfw_stdout("params " + config + " --set data.tokenizer=gpt2");
  EXPECT_NE(text.out.find("of which padding"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("36,096  (47 ids past the gpt2 tokenizer's 50257: no probability)"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("72,192  (2·47·d, logits no token can take)"), std::string::npos) << text.out;
  Output unnamed = tfw_stdout("params --json " + config);
  EXPECT_TRUE(nlohmann::json::parse(unnamed.out)["vocab_padding"].is_null()) << unnamed.out;
}

TEST(Experiments, PaperPlanCountsCumulativeBudgets) {
  Output plan = tfw_stdout("run --dry-run --json " + kSource +
                           "/experiments/paper/e1-progressive-scaling.toml --home "
                           "/tmp/tfw-test-dryrun");
  // Exit 2: the plan is printed, and so is its problem (openwebtext is not on this machine).
  ASSERT_EQ(plan.code, 2) << plan.output;
  EXPECT_NE(plan.output.find("unknown corpus 'openwebtext'"), std::string::npos) << plan.output.substr(0, 600);
  std::map<std::string, nlohmann::json> runs;
  const nlohmann::json parsed = nlohmann::json::parse(plan.out);  // a named value: no dangling range-for
  for (const auto& run : parsed["runs"]) runs[run["name"].get<std::string>()] = run;
  ASSERT_TRUE(runs.count("tokenformer-1400m")) << plan.output.substr(0, 600);
  const double ladder = runs["tokenformer-124m"]["training_flops"].get<double>() +
                        runs["tokenformer-354m"]["training_flops"].get<double>() +
                        runs["tokenformer-757m"]["training_flops"].get<double>() +
                        runs["tokenformer-1400m"]["training_flops"].get<double>();
  EXPECT_DOUBLE_EQ(runs["tokenformer-1400m"]["cumulative_flops"].get<double>(), ladder);
  EXPECT_EQ(runs["tokenformer-354m"]["parameters"].get<std::int64_t>(), 354190848);  // 354.2M
  EXPECT_EQ(runs["tokenformer-354m"]["parent"], "tokenformer-124m");
  EXPECT_TRUE(runs.count("transformer-354m-max_tokens3e+11")) << plan.output;
}

std::string write_experiment(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/tfw-test-experiment-" + name + ".toml";
  std::ofstream(path) << text;
  return path;
}

TEST(Experiments, ErrorsNameFileLineAndColumn) {
  struct Case {
    std::string text, expected;
  };
  const std::vector<Case> cases = {
      {"[runs.a]\nfamily = \"tokenformer\"\nmodle = {}\n", "unknown key 'runs.a.modle'"},
      {"[runs.a]\nfamily = \"tokenformer\"\nmodel = { layers = \"2\" }\n", "expected an integer, got a string"},
      {"[runs.a]\nparent = \"nobody\"\n", "runs.a.parent: 'nobody' is not a run of this experiment"},
      {"[experiment]\nextends = \"missing.toml\"\n[runs.a]\n", "experiment.extends: '/tmp/missing.toml' not found"},
      {"[experiment]\nname = \"x\"\n", "no runs"},
      {"[runs.a]\ngrid = { \"train.lr\" = 3 }\n", "runs.a.grid.train.lr: expected a non-empty array"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string path = write_experiment("bad" + std::to_string(i), cases[i].text);
    Output out = tfw("run --dry-run " + path);
    EXPECT_EQ(out.code, 2) << out.output;
    EXPECT_NE(out.output.find(cases[i].expected), std::string::npos) << cases[i].expected << "\n" << out.output;
  }
  // file:line:col for a bad key in a run entry.
  Output located =
      tfw("run --dry-run " + write_experiment("located", "[runs.a]\nfamily = \"tokenformer\"\nmodle = {}\n"));
  EXPECT_NE(located.output.find("tfw-test-experiment-located.toml:3:1"), std::string::npos) << located.output;
}

TEST(Experiments, ExtendsMergesAndGridsExpand) {
  const std::string base = write_experiment("base", R"([experiment]
name = "base"
[defaults]
family = "tokenformer"
model = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, vocab = 256, seq_len = 16 }
train = { max_steps = 3, batch_size = 2 }
[runs.a]
)");
  const std::string child = write_experiment("child", R"([experiment]
name = "child"
extends = "tfw-test-experiment-base.toml"
[runs.b]
grid = { "model.n_attn" = [8, 12], "model.pattention.norm" = ["l2_gelu", "softmax"] }
seeds = [0, 1]
)");
  Output plan = tfw_stdout("run --dry-run --json " + child + " --home /tmp/tfw-test-dryrun");
  ASSERT_EQ(plan.code, 0) << plan.output;
  nlohmann::json json = nlohmann::json::parse(plan.out);
  EXPECT_EQ(json["experiment"], "child");
  std::vector<std::string> names;
  for (const auto& run : json["runs"]) names.push_back(run["name"]);
  EXPECT_EQ(names.size(), 1u + 2 * 2 * 2);  // a, and b's grid x seeds
  EXPECT_NE(std::find(names.begin(), names.end(), "b-n_attn12-softmax-s1"), names.end()) << plan.output;
  (void)base;
}

TEST(Experiments, TinyExperimentRunsSkipsWhenRunAgainAndExports) {
  const std::string home = "/tmp/tfw-test-experiment-home";
  fs::remove_all(home);
  const std::string file = kSource + "/tests/data/tiny-experiment.toml";
  Output run = tfw("run " + file + " --home " + home);
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("3 of 3 runs finished"), std::string::npos) << run.output;
  Output again = tfw("run " + file + " --home " + home);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("small: finished before, skipped"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("training"), std::string::npos) << again.output;

  Output shown = tfw_stdout("runs show grown --json --home " + home);
  nlohmann::json grown = nlohmann::json::parse(shown.out);
  EXPECT_EQ(grown["experiment"], "tiny");
  EXPECT_EQ(grown["growth_method"], "pattention_grow");
  ASSERT_EQ(grown["lineage"].size(), 2u);
  const double val = grown["final_metrics"]["val_loss"].get<double>();

  Output md = tfw_stdout("export " + file + " --home " + home);
  ASSERT_EQ(md.code, 0) << md.output;
  EXPECT_NE(md.output.find("| grown | tokenformer | small | pattention_grow |"), std::string::npos) << md.output;
  EXPECT_NE(md.output.find(fmt::format("{:.4f}", val)), std::string::npos) << md.output;
  EXPECT_NE(md.output.find("| 14.02 | ppl | Table 6/7 | grown 124M->354M, 30B tokens |"), std::string::npos)
      << md.output;
  EXPECT_NE(md.output.find(fmt::format("{:.3e}", grown["cumulative_flops"].get<double>())), std::string::npos)
      << md.output;
  // CSV: one tidy table per file, plain numbers, units in the column names.
  Output csv = tfw_stdout("export " + file + " --format csv --home " + home);
  ASSERT_EQ(csv.code, 0) << csv.output;
  EXPECT_EQ(csv.output.substr(0, csv.output.find('\n')),
            "run,family,parent,growth_method,parameters,tokens,val_loss,val_perplexity,val_accuracy_percent,token_"
            "token_flops_per_1e4_t2,"
            "status,paper_value,paper_metric,paper_source,paper_scale");
  EXPECT_NE(csv.output.find(
                fmt::format("\ngrown,tokenformer,small,pattention_grow,{},", grown["parameters"].get<std::int64_t>())),
            std::string::npos)
      << csv.output;
  EXPECT_NE(csv.output.find(fmt::format(",{},", val)), std::string::npos) << csv.output;  // exact: reads back as val
  EXPECT_NE(csv.output.find(",14.02,ppl,Table 6/7,\"grown 124M->354M, 30B tokens\""), std::string::npos) << csv.output;
  Output ledger = tfw_stdout("export tiny --format csv --table ledger --home " + home);
  ASSERT_EQ(ledger.code, 0) << ledger.output;
  EXPECT_EQ(ledger.output.substr(0, ledger.output.find('\n')),
            "run,parameters,tokens,stage_flops,cumulative_flops,wall_seconds,other_cpu_share,contended,host");
  EXPECT_EQ(ledger.output.find(" s,"), std::string::npos) << ledger.output;  // no units in cells
  EXPECT_EQ(tfw("export tiny --format csv --table all --home " + home).code, 2);
  Output latex = tfw_stdout("export " + file + " --format latex --home " + home + " --curves " + home + "/curves.csv");
  ASSERT_EQ(latex.code, 0) << latex.output;
  EXPECT_NE(latex.output.find("\\begin{tabular}"), std::string::npos);
  EXPECT_NE(latex.output.find("grown & tokenformer & small & pattention\\_grow"), std::string::npos) << latex.output;
  EXPECT_NE(latex.output.find("($10^4\\,T^2$)"), std::string::npos) << latex.output;
  // Paper-ready: booktabs rules, numbers right-aligned, FLOPs as m\times10^{e}, and no column
  // that is empty in every row (this experiment has no accuracy: no "val accuracy" column).
  EXPECT_NE(latex.output.find("\\toprule"), std::string::npos) << latex.output;
  EXPECT_NE(latex.output.find("\\bottomrule"), std::string::npos) << latex.output;
  EXPECT_EQ(latex.output.find("\\hline"), std::string::npos) << latex.output;
  EXPECT_NE(latex.output.find("\\times10^{"), std::string::npos) << latex.output;
  EXPECT_EQ(latex.output.find("e+1"), std::string::npos) << latex.output;
  EXPECT_EQ(latex.output.find("val accuracy"), std::string::npos) << latex.output;
  EXPECT_NE(latex.output.find("{llllr"), std::string::npos)
      << latex.output;  // run, family, grown from, growth | parameters
  // It compiles as it is in a plain portrait article, and every table fits the page: no
  // overfull box in the log.
  std::ofstream(home + "/tables.tex") << "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n"
                                         "\\begin{document}\n"
                                      << latex.output << "\\end{document}\n";
  Output compiled = shell("cd " + home + " && pdflatex -halt-on-error -interaction=nonstopmode tables.tex");
  EXPECT_EQ(compiled.code, 0) << compiled.output;
  EXPECT_TRUE(fs::exists(home + "/tables.pdf"));
  EXPECT_EQ(compiled.output.find("Overfull"), std::string::npos) << compiled.output;
  std::ifstream curves(home + "/curves.csv");
  std::string header;
  std::getline(curves, header);
  EXPECT_EQ(header, "run,key,step,tokens,flops,cumulative_flops,value");
  Output missing = tfw("export nosuch --home " + home);
  EXPECT_EQ(missing.code, 2);
}

TEST(Experiments, ABatchStoppedWithSigtermResumesWhereItStopped) {
  const std::string home = "/tmp/tfw-test-experiment-sigterm";
  fs::remove_all(home);
  // The tiny experiment with a first run long enough to be stopped in the middle: it is
  // stopped about 0.1 s after its first checkpoint (step 5), some 20 steps in, and 400 steps
  // leave it running for seconds more even where steps are fast. (It had 3,000, and the
  // resume trained the 2,980 left: 20 s of the suite for nothing the test reads.)
  std::ifstream tiny(kSource + "/tests/data/tiny-experiment.toml");
  std::string text((std::istreambuf_iterator<char>(tiny)), std::istreambuf_iterator<char>());
  text.replace(text.find("max_steps = 20 }"), 16, "max_steps = 400 }");
  const std::string file = write_experiment("sigterm", text);
  // Stop the batch once the first run has a checkpoint.
  const std::string script = fmt::format(
      "{0} run {1} --home {2} & pid=$!; "
      "for i in $(seq 600); do ls {2}/runs/tiny/small/checkpoints/*.toml >/dev/null 2>&1 && break; sleep 0.1; done; "
      "kill -TERM $pid; wait $pid; echo rc=$?",
      TFW_BINARY, file, home);
  Output stopped = shell(script);
  EXPECT_NE(stopped.output.find("rc=130"), std::string::npos) << stopped.output;
  Output listed = tfw_stdout("runs list --json --experiment tiny --home " + home);
  nlohmann::json runs = nlohmann::json::parse(listed.out)["runs"];
  ASSERT_GE(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "killed");
  Output resumed = tfw("run " + file + " --home " + home);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("small: killed before, resuming"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("3 of 3 runs finished"), std::string::npos) << resumed.output;
  listed = tfw_stdout("runs list --json --experiment tiny --home " + home);
  const nlohmann::json final_runs = nlohmann::json::parse(listed.out)["runs"];
  for (const auto& run : final_runs) EXPECT_EQ(run["status"], "finished") << run.dump();
  EXPECT_EQ(final_runs.size(), 3u);
}

}  // namespace test_experiments
