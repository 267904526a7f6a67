// Statistics, comparisons, figures and the claims report end to end, with the real binary on
// a tiny experiment of three seeds (tests/data/tiny-seeds.toml). Every number the tools print
// is recomputed here from the per-run values they export: means and t intervals by hand,
// paired differences, and compute-to-reach from the exported curves with this file's own
// interpolation. Figures: the SVG parses as XML with one path per run; the PNG holds each
// line group's colour. Bad input exits 2 with the problem named.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stb_image.h>

#include "tests/cli/run_command.h"
#include "tests/cli/trained_once.h"

namespace test_report {

namespace fs = std::filesystem;

const std::string kSource = TFW_SOURCE_DIR;
const std::string kExperiment = kSource + "/tests/data/tiny-seeds.toml";
const double kT975Df2 = 4.302652729749464;  // Student t, 97.5%, 2 degrees of freedom

// A file's bytes ("" when it cannot be read).
std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

tfw::test::Result tfw(const std::string& arguments, bool with_stderr = true) {
  return tfw::test::capture(TFW_BINARY " " + arguments, with_stderr);
}

// A CSV with a header: rows of column -> cell.
std::vector<std::map<std::string, std::string>> csv(const std::string& text) {
  std::vector<std::map<std::string, std::string>> rows;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header;
  auto split = [](const std::string& l) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char c : l) {
      if (c == '"')
        quoted = !quoted;
      else if (c == ',' && !quoted)
        cells.push_back(cell), cell.clear();
      else
        cell += c;
    }
    cells.push_back(cell);
    return cells;
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto cells = split(line);
    if (header.empty()) {
      header = cells;
      continue;
    }
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

class Report : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    home_ = new std::string((fs::temp_directory_path() / ("tfw-report-" + std::to_string(getpid()))).string());
    // Trained once per suite run (tests/cli/trained_once.h), copied for this process.
    const std::string failure = tfw::test::trained_home(TFW_BINARY " run " + kExperiment + " --home $H", *home_);
    ASSERT_EQ(failure, "");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*home_);
    delete home_;
  }
  static std::string home() { return *home_; }
  // Final val loss per run name, from the exported per-run table.
  static std::map<std::string, double> final_losses() {
    std::map<std::string, double> out;
    const auto table = tfw("export " + kExperiment + " --home " + home() + " --format csv --table results", false);
    EXPECT_EQ(table.code, 0) << table.output;
    for (auto& row : csv(table.out)) out[row["run"]] = std::stod(row["val_loss"]);
    return out;
  }
  static std::string* home_;
};
std::string* Report::home_ = nullptr;

TEST_F(Report, GroupsShowTheMeanAndTheStudentTIntervalOverSeeds) {
  const auto losses = final_losses();
  ASSERT_EQ(losses.size(), 12u);
  const auto groups = tfw("export " + kExperiment + " --home " + home() + " --format csv --table groups", false);
  ASSERT_EQ(groups.code, 0) << groups.output;
  const auto rows = csv(groups.out);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    SCOPED_TRACE(row.at("variant"));
    std::vector<double> v;
    for (int seed = 0; seed < 3; ++seed) v.push_back(losses.at(row.at("variant") + "-s" + std::to_string(seed)));
    const double mean = (v[0] + v[1] + v[2]) / 3;
    const double sd = std::sqrt((std::pow(v[0] - mean, 2) + std::pow(v[1] - mean, 2) + std::pow(v[2] - mean, 2)) / 2);
    EXPECT_EQ(row.at("seeds"), "0 1 2");
    EXPECT_EQ(row.at("finished"), "3");
    EXPECT_NEAR(std::stod(row.at("mean")), mean, 1e-12);
    EXPECT_NEAR(std::stod(row.at("sd")), sd, 1e-12);
    EXPECT_NEAR(std::stod(row.at("ci95_half_width")), kT975Df2 * sd / std::sqrt(3.0), 1e-11);
  }
}

TEST_F(Report, APairedComparisonIsTheMeanOfPerSeedDifferences) {
  const auto losses = final_losses();
  const auto table = tfw("export " + kExperiment + " --home " + home() + " --format csv --table comparisons", false);
  ASSERT_EQ(table.code, 0) << table.output;
  std::map<std::string, std::map<std::string, std::string>> by_name;
  for (auto& row : csv(table.out)) by_name[row["comparison"]] = row;
  ASSERT_EQ(by_name.size(), 4u);
  const auto& c = by_name.at("grown-vs-scratch");
  std::vector<double> d;
  for (int seed = 0; seed < 3; ++seed) {
    d.push_back(losses.at("grown-s" + std::to_string(seed)) - losses.at("scratch-s" + std::to_string(seed)));
  }
  const double mean = (d[0] + d[1] + d[2]) / 3;
  const double sd = std::sqrt((std::pow(d[0] - mean, 2) + std::pow(d[1] - mean, 2) + std::pow(d[2] - mean, 2)) / 2);
  const double half = kT975Df2 * sd / std::sqrt(3.0);
  EXPECT_NEAR(std::stod(c.at("difference")), mean, 1e-12);
  EXPECT_NEAR(std::stod(c.at("ci95_low")), mean - half, 1e-11);
  EXPECT_NEAR(std::stod(c.at("ci95_high")), mean + half, 1e-11);
  const int less = (d[0] < 0) + (d[1] < 0) + (d[2] < 0);
  EXPECT_EQ(c.at("seeds_a_less"), std::to_string(less));  // a count: its denominator is `pairs`
  EXPECT_EQ(c.at("pairs"), "3");
  // One row per seed, tidy: the same per-seed values and differences.
  const auto seeds =
      tfw("export " + kExperiment + " --home " + home() + " --format csv --table comparison_seeds", false);
  ASSERT_EQ(seeds.code, 0) << seeds.output;
  int rows = 0;
  for (auto& row : csv(seeds.out)) {
    if (row["comparison"] != "grown-vs-scratch") continue;
    const std::string seed = row["seed"];
    EXPECT_DOUBLE_EQ(std::stod(row["a"]), losses.at("grown-s" + seed));
    EXPECT_DOUBLE_EQ(std::stod(row["b"]), losses.at("scratch-s" + seed));
    EXPECT_DOUBLE_EQ(std::stod(row["difference"]), d[std::stoi(seed)]);
    ++rows;
  }
  EXPECT_EQ(rows, 3);
  // The verdict follows the written rule.
  const std::string expected = mean + half < 0 ? "supported" : mean - half > 0 ? "not supported" : "inconclusive";
  EXPECT_EQ(c.at("verdict"), expected);
}

// Cumulative FLOPs at which a curve first reaches `target`, interpolated linearly in loss and
// log FLOPs: this test's own implementation, from the exported curves.
std::optional<double> reach(const std::vector<std::pair<double, double>>& curve, double target) {
  for (std::size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].second > target) continue;
    if (i == 0) return curve[i].first;
    const auto [x0, y0] = curve[i - 1];
    const auto [x1, y1] = curve[i];
    return std::exp(std::log(x0) + (target - y0) / (y1 - y0) * (std::log(x1) - std::log(x0)));
  }
  return std::nullopt;
}

TEST_F(Report, ComputeToReachALossFollowsTheLineageCurves) {
  const std::string curves_file = home() + "/curves.csv";
  ASSERT_EQ(tfw("export " + kExperiment + " --home " + home() + " --curves " + curves_file + " --table groups").code,
            0);
  const std::string curves = file_text(curves_file);
  std::map<std::string, std::vector<std::pair<double, double>>> val;  // run -> (cumulative FLOPs, loss)
  for (auto& row : csv(curves)) {
    if (row["key"] == "val/loss")
      val[row["run"]].push_back({std::stod(row["cumulative_flops"]), std::stod(row["value"])});
  }
  double log_a = 0, log_b = 0;
  for (int seed = 0; seed < 3; ++seed) {
    const std::string s = "-s" + std::to_string(seed);
    // The grown lineage: the small run's evaluations up to the growth, then the grown run's.
    std::vector<std::pair<double, double>> lineage;
    const double growth = val.at("grown" + s).front().first;
    for (const auto& p : val.at("small" + s)) {
      if (p.first <= growth * (1 + 1e-9)) lineage.push_back(p);
    }
    for (const auto& p : val.at("grown" + s)) lineage.push_back(p);
    const auto a = reach(lineage, 4.0), b = reach(val.at("baseline" + s), 4.0);
    ASSERT_TRUE(a && b) << seed;
    log_a += std::log10(*a) / 3;
    log_b += std::log10(*b) / 3;
  }
  const auto table = tfw("export " + kExperiment + " --home " + home() + " --format csv --table comparisons", false);
  for (auto& row : csv(table.out)) {
    if (row["comparison"] != "compute-to-reach") continue;
    // Curves are exported with 6 significant digits: agreement to that precision.
    EXPECT_NEAR(std::log10(std::stod(row["a_mean"])), log_a, 2e-5);
    EXPECT_NEAR(std::log10(std::stod(row["b_mean"])), log_b, 2e-5);
    EXPECT_NEAR(std::stod(row["difference"]), log_a - log_b, 4e-5);
    return;
  }
  FAIL() << "no compute-to-reach row in\n" << table.output;
}

TEST_F(Report, FiguresHaveOnePathPerRunAndEveryGroupsColour) {
  const std::string dir = home() + "/figures";
  const auto out = tfw("export " + kExperiment + " --home " + home() + " --figures " + dir + " --table groups");
  ASSERT_EQ(out.code, 0) << out.output;
  // XML parses, one <path class="run"> per finished run, named.
  const auto parsed =
      tfw::test::capture(std::string(TFW_PYTHON) +
                         " -c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
                         "ns = '{http://www.w3.org/2000/svg}'; "
                         "print(sorted(p.get('data-run') for p in r.iter(ns + 'path') if p.get('class') == 'run')); "
                         "print(len([t for t in r.iter(ns + 'text') if t.text == 'validation loss (nats/token)']))\" " +
                         dir + "/loss_vs_flops.svg");
  ASSERT_EQ(parsed.code, 0) << parsed.output;
  EXPECT_NE(parsed.output.find("['baseline-s0', 'baseline-s1', 'baseline-s2', 'grown-s0', 'grown-s1', 'grown-s2', "
                               "'scratch-s0', 'scratch-s1', 'scratch-s2', 'small-s0', 'small-s1', 'small-s2']"),
            std::string::npos)
      << parsed.output;
  EXPECT_NE(parsed.output.find("\n1\n"), std::string::npos) << parsed.output;  // the y-axis label
  // The PNG (rasterised from the SVG) holds each lineage's colour, the palette's first three
  // (workbench/colormap.h: blue, red, green): small and the grown run it is the only growth of
  // share one, baseline and scratch have their own; a fourth (yellow) is nowhere.
  int w = 0, h = 0, channels = 0;
  unsigned char* pixels = stbi_load((dir + "/loss_vs_flops.png").c_str(), &w, &h, &channels, 3);
  ASSERT_NE(pixels, nullptr);
  const int colours[4][3] = {{68, 119, 170}, {238, 102, 119}, {34, 136, 51}, {204, 187, 68}};
  for (int k = 0; k < 4; ++k) {
    const int* c = colours[k];
    int count = 0;
    for (int i = 0; i < w * h; ++i) {
      const unsigned char* p = pixels + 3 * i;
      count += std::abs(p[0] - c[0]) <= 6 && std::abs(p[1] - c[1]) <= 6 && std::abs(p[2] - c[2]) <= 6;
    }
    if (k < 3) {
      EXPECT_GT(count, 100) << c[0] << "," << c[1] << "," << c[2];
    } else {
      EXPECT_LT(count, 5) << "a fourth colour: " << c[0] << "," << c[1] << "," << c[2];
    }
  }
  stbi_image_free(pixels);
  EXPECT_TRUE(fs::exists(dir + "/flops_vs_length.svg"));
}

// E1's stage-budget runs are evaluated once, at their end: the figure must still show them
// (they are in its legend), as a dot in their colour, and the caption must say what a dot is.
TEST(Figures, ARunWithASingleEvaluationIsADotNotDropped) {
  const std::string home = (fs::temp_directory_path() / ("tfw-figure-dot-" + std::to_string(getpid()))).string();
  fs::remove_all(home);
  fs::create_directories(home);
  const std::string experiment = home + "/dot.toml";
  {
    std::ofstream out(experiment);
    out << "[experiment]\nname = \"dot\"\n[experiment.figures]\nloss_vs_flops = \"Fig. 3\"\n"
           "[defaults]\ndata = { corpus = \"kjv\" }\n"
           "train = { batch_size = 4, lr = 3e-3, warmup_steps = 1, eval_every = 50, eval_batches = 1 }\n"
           "[runs.once]\nfamily = \"tokenformer\"\n"
           "model = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, vocab = 256, seq_len = 16 }\n"
           "train = { max_steps = 3 }\n"
           "[runs.often]\nfamily = \"tokenformer\"\n"
           "model = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, vocab = 256, seq_len = 16 }\n"
           "train = { max_steps = 6, eval_every = 2 }\n";
  }
  ASSERT_EQ(tfw("run " + experiment + " --home " + home).code, 0);
  const auto out = tfw("export " + experiment + " --home " + home + " --figures " + home + "/fig");
  ASSERT_EQ(out.code, 0) << out.output;
  const auto parsed = tfw::test::capture(
      std::string(TFW_PYTHON) +
      " -c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
      "ns = '{http://www.w3.org/2000/svg}'; "
      "print([(c.get('data-run'), c.get('fill')) for c in r.iter(ns + 'circle') if c.get('class') == 'point']); "
      "print(sorted(p.get('data-run') for p in r.iter(ns + 'path') if p.get('class') == 'run'))\" " +
      home + "/fig/loss_vs_flops.svg");
  ASSERT_EQ(parsed.code, 0) << parsed.output;
  // "once" is the first group: the palette's first colour (workbench/colormap.h). "often" has
  // a line and no dot.
  EXPECT_NE(parsed.output.find("[('once', '#4477aa')]"), std::string::npos) << parsed.output;
  EXPECT_NE(parsed.output.find("['often', 'once']"), std::string::npos) << parsed.output;
  EXPECT_NE(file_text(home + "/fig/loss_vs_flops.svg").find("a dot is a run with a single evaluation"),
            std::string::npos);
  fs::remove_all(home);
}

// The setup table's batch cell says how a step's batch was split: micro-batches given by hand
// multiply it; "auto" says the memory split it.
TEST(Figures, TheSetupTableSaysHowAStepsBatchWasSplit) {
  const std::string home = (fs::temp_directory_path() / ("tfw-setup-split-" + std::to_string(getpid()))).string();
  fs::remove_all(home);
  fs::create_directories(home);
  const std::string experiment = home + "/split.toml";
  std::ofstream(experiment) << "[experiment]\nname = \"split\"\n"
                               "[defaults]\ndata = { corpus = \"kjv\" }\nfamily = \"tokenformer\"\n"
                               "model = { layers = 1, d = 16, heads = 2, n_attn = 8, n_ffn = 16, vocab = 256, "
                               "seq_len = 16 }\n"
                               "[runs.by-hand]\ntrain = { batch_size = 4, grad_accum = 2, max_steps = 2 }\n"
                               "[runs.fitted]\ntrain = { batch_size = 8, grad_accum = \"auto\", max_steps = 2 }\n";
  ASSERT_EQ(tfw("run " + experiment + " --home " + home).code, 0);
  const auto out = tfw("report " + experiment + " --home " + home + " --out " + home + "/report");
  ASSERT_EQ(out.code, 0) << out.output;
  const std::string report = file_text(home + "/report/split.md");
  EXPECT_NE(report.find("| 4 × 16 × 2 micro-batches |"), std::string::npos) << report;
  EXPECT_NE(report.find("| 8 × 16 (in micro-batches that fit) |"), std::string::npos) << report;
  fs::remove_all(home);
}

TEST_F(Report, NamesEachClaimWithAVerdict) {
  const std::string out_dir = home() + "/report";
  const auto out = tfw("report " + kExperiment + " --home " + home() + " --out " + out_dir);
  ASSERT_EQ(out.code, 0) << out.output;
  const std::string report = file_text(out_dir + "/tiny-seeds.md");
  for (const char* claim : {"The grown model ends below the same size from scratch",
                            "At the grown lineage's compute, the grown model is below the same size from scratch",
                            "The grown lineage reaches a loss of 4.0 with less compute than the Transformer"}) {
    const std::size_t at = report.find(claim);
    ASSERT_NE(at, std::string::npos) << claim;
    const std::size_t verdict = report.find("**Verdict: ", at);
    ASSERT_NE(verdict, std::string::npos) << claim;
    const std::string word = report.substr(verdict + 11, 14);
    EXPECT_TRUE(word.rfind("supported**", 0) == 0 || word.rfind("not supported*", 0) == 0 ||
                word.rfind("inconclusive**", 0) == 0)
        << word;
  }
  // The unclaimed comparison is in the tables, not among the claims.
  EXPECT_EQ(report.find("### 4."), std::string::npos);
  EXPECT_NE(report.find("| at-tokens |"), std::string::npos);
  EXPECT_NE(report.find("## Verdict rule"), std::string::npos);
  EXPECT_NE(report.find("figures/tiny-seeds/loss_vs_flops.svg"), std::string::npos);
  EXPECT_TRUE(fs::exists(out_dir + "/figures/tiny-seeds/loss_vs_flops.png"));
}

TEST_F(Report, RunsCompareGroupsRunsThatDifferOnlyInSeed) {
  const auto out = tfw("runs compare grown-s0 grown-s1 grown-s2 scratch-s0 --json --home " + home(), false);
  ASSERT_EQ(out.code, 0) << out.output;
  const auto json = nlohmann::json::parse(out.out);
  ASSERT_EQ(json["groups"].size(), 2u);
  EXPECT_EQ(json["groups"][0]["label"], "grown");
  EXPECT_EQ(json["groups"][0]["n"], 3);
  const auto losses = final_losses();
  EXPECT_NEAR(json["groups"][0]["val_loss_mean"].get<double>(),
              (losses.at("grown-s0") + losses.at("grown-s1") + losses.at("grown-s2")) / 3, 1e-9);
  EXPECT_TRUE(json["groups"][1]["val_loss_ci95"].is_null());  // n = 1: no interval
}

// The experiment file with `extra` appended, in the suite's temp home.
std::string variant_file(const std::string& home, const std::string& name, const std::string& extra) {
  const std::string path = home + "/" + name + ".toml";
  std::ofstream(path) << file_text(kExperiment) << "\n" << extra;
  return path;
}

TEST_F(Report, BadComparisonsAreClearErrors) {
  const std::string unknown = variant_file(home(), "unknown", "[comparisons.bad]\na = \"grown\"\nb = \"nosuch\"\n");
  auto out = tfw("export " + unknown + " --home " + home());
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("comparisons.bad.b: 'nosuch' is not a run of this experiment"), std::string::npos)
      << out.output;
  EXPECT_NE(out.output.find("unknown.toml:"), std::string::npos) << out.output;  // file:line:col

  const std::string beyond = variant_file(
      home(), "beyond", "[comparisons.far]\na = \"grown\"\nb = \"scratch\"\nat = \"flops\"\nbudget = 1e15\n");
  out = tfw("export " + beyond + " --home " + home());
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("comparison far"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("lies outside the curve"), std::string::npos) << out.output;

  const std::string empty =
      variant_file(home(), "empty",
                   "[runs.never]\nfamily = \"transformer\"\nmodel = { layers = 1, d = 32, heads = 4, "
                   "d_ffn = 64, vocab = 256, seq_len = 32 }\ntrain = { max_steps = 5 }\n"
                   "[comparisons.void]\na = \"never\"\nb = \"grown\"\n");
  // A side the file plans but that has not run is not an error: the claim is not decided yet.
  out = tfw("report " + empty + " --home " + home() + " --out " + home() + "/void");
  EXPECT_EQ(out.code, 0) << out.output;
  const std::string void_text = file_text(home() + "/void/tiny-seeds.md");
  EXPECT_NE(void_text.find("| void | never | grown | final val/loss | 0 | - |"), std::string::npos) << void_text;
  EXPECT_NE(void_text.find("| a < b | not yet decided |"), std::string::npos) << void_text;

  const std::string bad_budget = variant_file(
      home(), "budget", "[comparisons.b]\na = \"grown\"\nb = \"scratch\"\nat = \"tokens\"\nbudget = \"c\"\n");
  out = tfw("export " + bad_budget + " --home " + home());
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("comparisons.b.budget: 'c' is not \"a\", \"b\" or a number"), std::string::npos)
      << out.output;
}

TEST_F(Report, AChangedFinishedRunIsRefusedNotSkipped) {
  std::string changed = file_text(kExperiment);
  const std::string from = "train = { max_steps = 40 }\n\n[runs.baseline]";
  ASSERT_NE(changed.find(from), std::string::npos);
  changed.replace(changed.find(from), from.size(), "train = { max_steps = 41 }\n\n[runs.baseline]");
  const std::string path = home() + "/changed.toml";
  std::ofstream(path) << changed;
  const auto out = tfw("run " + path + " --home " + home());
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("scratch-s0, scratch-s1, scratch-s2"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("tfw runs delete"), std::string::npos) << out.output;
}

}  // namespace test_report

namespace test_report {

TEST_F(Report, FitUsesTheFamilysRunsFromScratchAndRefusesTooFew) {
  // Before the grid: the tokenformer runs from scratch are small and scratch, 2 distinct points.
  auto out = tfw("fit tokenformer --home " + home());
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("at least 5 distinct (parameters, tokens) points, and there are 2"), std::string::npos)
      << out.output;
  ASSERT_EQ(tfw("run " + kSource + "/tests/data/tiny-fit.toml --home " + home()).code, 0);
  out = tfw("fit tokenformer --json --home " + home(), false);
  ASSERT_EQ(out.code, 0) << out.output;
  const auto json = nlohmann::json::parse(out.out);
  // 6 grid runs + 3 small + 3 scratch; the grown runs are left out. `small` is the grid's
  // (n_ffn 32, 20 steps) point again, so the points are 6 + 1 (scratch) distinct.
  EXPECT_EQ(json["runs"], 12);
  EXPECT_EQ(json["distinct_points"], 7);
  EXPECT_EQ(json["corpus"], "kjv");
  // E = exp(e) >= 0. On some hosts of this machine kind the best fit of these 7 tiny points
  // puts E at the boundary (exp underflows to 0.0; the tfw of a399711 gives the same there), so
  // only its sign is asserted; the fit's quality is the error bound below.
  EXPECT_GE(json["law"]["E"].get<double>(), 0);
  EXPECT_LT(json["rms_log_error"].get<double>(), 0.1);
  out = tfw("fit tokenformer --experiment tiny-fit --json --home " + home(), false);
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_EQ(nlohmann::json::parse(out.out)["runs"], 6);  // only the grid's runs
  out = tfw("fit tokenformer --corpus gcide --home " + home());
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("no finished runs of 'tokenformer' from scratch on corpus 'gcide'"), std::string::npos)
      << out.output;
}

}  // namespace test_report

namespace test_report {

// metrics.jsonl of a run folder: key -> step -> value.
std::map<std::string, std::map<long, double>> metrics_of(const std::string& run_dir) {
  std::map<std::string, std::map<long, double>> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["value"].is_number()) out[j["key"].get<std::string>()][j["step"].get<long>()] = j["value"].get<double>();
  }
  return out;
}

TEST(EvalCorpora, AnotherCorpusIsEvaluatedOnTheSameWindowsWithoutChangingTraining) {
  const std::string home = (fs::temp_directory_path() / ("tfw-evalcorpora-" + std::to_string(getpid()))).string();
  fs::remove_all(home);
  fs::create_directories(home);
  const std::string model =
      "family = \"tokenformer\"\nmodel = { layers = 2, d = 32, heads = 4, n_attn = 16, n_ffn = 32, vocab = 256, "
      "seq_len = 32 }\n";
  const std::string train =
      "train = { batch_size = 8, max_steps = 10, eval_every = 5, eval_batches = 2, "
      "checkpoint_every = 10, peak_flops = 1e11 }\n";
  std::ofstream(home + "/with.toml") << model << "data = { corpus = \"kjv\", eval_corpora = [\"gcide\"] }\n" << train;
  std::ofstream(home + "/without.toml") << model << "data = { corpus = \"kjv\" }\n" << train;
  std::ofstream(home + "/gcide.toml") << model << "data = { corpus = \"gcide\" }\n" << train;
  ASSERT_EQ(tfw("train " + home + "/with.toml --name with --home " + home).code, 0);
  ASSERT_EQ(tfw("train " + home + "/without.toml --name without --home " + home).code, 0);
  const auto with = metrics_of(home + "/runs/with"), without = metrics_of(home + "/runs/without");
  ASSERT_EQ(with.at("val/loss@gcide").size(), 2u);             // at steps 5 and 10
  EXPECT_EQ(with.at("train/loss"), without.at("train/loss"));  // evaluation draws no random numbers
  EXPECT_EQ(with.at("val/loss"), without.at("val/loss"));
  // The same windows as a run on gcide: a run started from `with`'s final weights on gcide
  // evaluates them at its step 0 to the same value.
  ASSERT_EQ(tfw("train " + home + "/gcide.toml --name on-gcide --init-from " + home +
                "/runs/with/checkpoints/step-00000010.safetensors --home " + home)
                .code,
            0);
  const auto on_gcide = metrics_of(home + "/runs/on-gcide");
  EXPECT_EQ(on_gcide.at("val/loss").at(0), with.at("val/loss@gcide").at(10));
  // Bad input.
  std::ofstream(home + "/own.toml") << model << "data = { corpus = \"kjv\", eval_corpora = [\"kjv\"] }\n" << train;
  auto out = tfw("train " + home + "/own.toml --name own --home " + home);
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("data.eval_corpora: 'kjv' is the run's own corpus"), std::string::npos) << out.output;
  std::ofstream(home + "/typo.toml") << model << "data = { corpus = \"kjv\", eval_corpora = \"gcide\" }\n" << train;
  out = tfw("train " + home + "/typo.toml --name typo --home " + home);
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("data.eval_corpora"), std::string::npos) << out.output;
  fs::remove_all(home);
}

}  // namespace test_report
