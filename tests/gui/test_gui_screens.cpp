// The GUI end to end: the real `tfw gui --screenshot` under Xvfb (xvfb-run) on a store filled
// by a tiny experiment, every view checked on the PNG it writes (size, not blank, the plot
// area holds the curve colours, the attention view holds heat-map cells); empty and
// newer-schema stores render their states without touching the file; no display is a clear
// error. `tfw attention` writes a CSV and a PNG whose shapes and values agree.
#include <unistd.h>
#include <stb_image.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_command.h"
#include "tests/cli/trained_once.h"
#include "tests/gui/store_files.h"
#include "workbench/colormap.h"
#include "workbench/service/serve_process.h"

namespace {

namespace fs = std::filesystem;
using tfw::test::capture;
using tfw::test::Result;

// Per process: ctest runs each test in a process of its own, two at a time, and each sets the
// suite up; a shared folder was wiped by one while the other used it (tests then skipped).
const std::string kHome = "/tmp/tfw-test-gui-home-" + std::to_string(::getpid());
const std::string kShots = "/tmp/tfw-test-gui-shots-" + std::to_string(::getpid());

Result tfw(const std::string& arguments) { return capture(std::string(TFW_BINARY) + " " + arguments); }
Result gui(const std::string& arguments) {
  return capture("xvfb-run -a -s '-screen 0 1600x1000x24' " + std::string(TFW_BINARY) + " gui " + arguments);
}

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
  bool load(const std::string& path) {
    int channels = 0;
    unsigned char* data = stbi_load(path.c_str(), &width, &height, &channels, 3);
    if (!data) return false;
    rgb.assign(data, data + static_cast<std::size_t>(width) * height * 3);
    stbi_image_free(data);
    return true;
  }
  const unsigned char* at(int x, int y) const { return &rgb[(static_cast<std::size_t>(y) * width + x) * 3]; }
  std::size_t distinct_colours() const {
    std::set<std::uint32_t> colours;
    for (std::size_t i = 0; i < rgb.size(); i += 3) colours.insert(rgb[i] << 16 | rgb[i + 1] << 8 | rgb[i + 2]);
    return colours.size();
  }
  // Pixels in the box within `tolerance` (per channel) of the colour.
  std::size_t count_near(int r, int g, int b, int tolerance, int x0 = 0, int y0 = 0, int x1 = -1, int y1 = -1) const {
    if (x1 < 0) x1 = width;
    if (y1 < 0) y1 = height;
    std::size_t count = 0;
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        const unsigned char* p = at(x, y);
        count += std::abs(p[0] - r) <= tolerance && std::abs(p[1] - g) <= tolerance && std::abs(p[2] - b) <= tolerance;
      }
    }
    return count;
  }
};

class GuiScreens : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    std::filesystem::remove_all(kHome);
    std::filesystem::remove_all(kShots);
  }
  static void SetUpTestSuite() {
    fs::remove_all(kHome);
    fs::remove_all(kShots);
    fs::create_directories(kShots);
    // The tiny experiment, trained once per suite run (tests/cli/trained_once.h), copied here.
    const std::string failure =
        tfw::test::trained_home(TFW_BINARY " run " TFW_SOURCE_DIR "/tests/data/tiny-experiment.toml --home $H", kHome);
    ASSERT_EQ(failure, "");
  }

  static Image shot(const std::string& view, const std::string& extra = "", const std::string& home = kHome) {
    const std::string path = kShots + "/" + view + ".png";
    fs::remove(path);
    Result result = gui("--home " + home + " --screenshot " + path + " --view " + view + " --size 1200 " + extra);
    EXPECT_EQ(result.code, 0) << result.output;
    Image image;
    EXPECT_TRUE(image.load(path)) << path;
    return image;
  }
};

TEST_F(GuiScreens, RunsViewListsTheStore) {
  Image image = shot("runs");
  EXPECT_EQ(image.width, 1200);
  EXPECT_EQ(image.height, 750);
  EXPECT_GT(image.distinct_colours(), 20u);
  // The finished status is drawn in its green on three rows.
  EXPECT_GT(image.count_near(115, 217, 115, 30), 90u);
}

// Runs submitted to Slurm: the runs view lists their jobs with Slurm's states in the colours
// of the statuses they lead to (the rows are written here as `tfw run --executor slurm` and
// `tfw jobs --slurm` write them; tests/slurm/test_slurm.sh runs the real thing).
TEST_F(GuiScreens, RunsViewShowsTheSlurmJobsAndTheirStates) {
  const std::string home = "/tmp/tfw-test-gui-slurm";
  fs::remove_all(home);
  fs::create_directories(home);
  fs::copy_file(kHome + "/runs.db", home + "/runs.db");
  Image before = shot("runs", "", home);
  const std::size_t red_before = before.count_near(255, 102, 89, 30),
                    orange_before = before.count_near(255, 179, 77, 30);
  Result added =
      capture("sqlite3 " + home + "/runs.db \"PRAGMA user_version\" && sqlite3 " + home +
              "/runs.db \"INSERT INTO cluster_jobs (experiment, run, scheduler, job_id, state, submitted, "
              "updated, exit_code, reason) VALUES ('tiny', 'small', 'slurm', '41_0', 'COMPLETED', 0, 0, 0, ''), "
              "('tiny', 'baseline', 'slurm', '41_1', 'FAILED', 0, 0, 3, 'NonZeroExitCode'), "
              "('tiny', 'grown', 'slurm', '42', 'CANCELLED', 0, 0, 0, 'DependencyNeverSatisfied')\"");
  ASSERT_EQ(added.code, 0) << added.output;
  Image image = shot("runs", "", home);
  fs::copy_file(kShots + "/runs.png", kShots + "/runs-slurm.png", fs::copy_options::overwrite_existing);
  // FAILED in the failed red and CANCELLED in the killed orange: neither is on the plain view.
  EXPECT_GT(image.count_near(255, 102, 89, 30), red_before + 15) << kShots << "/runs-slurm.png";
  EXPECT_GT(image.count_near(255, 179, 77, 30), orange_before + 15) << kShots << "/runs-slurm.png";
}

// The palette's colours (workbench/colormap.h): blue, red, green.
constexpr int kFirst[3] = {68, 119, 170}, kSecond[3] = {238, 102, 119}, kThird[3] = {34, 136, 51};

std::size_t count_colour(const Image& image, const int (&c)[3], int tolerance, int x0, int y0, int x1, int y1) {
  return image.count_near(c[0], c[1], c[2], tolerance, x0, y0, x1, y1);
}

// A grown lineage reads as one line: small and grown (grown from small) share the palette's
// first colour, and the baseline takes the second; no third colour is drawn.
TEST_F(GuiScreens, CurvesViewDrawsALineageInOneColourAndEveryOtherRunInItsOwn) {
  Image image = shot("curves", "--select small,grown,baseline --x cumulative_flops --metric train/loss");
  ASSERT_EQ(image.width, 1200);
  // The plot area (below the controls, right of the y labels).
  const int x0 = 80, y0 = 80, x1 = 1180, y1 = 690;
  EXPECT_GT(count_colour(image, kFirst, 40, x0, y0, x1, y1), 200u) << kShots << "/curves.png";
  EXPECT_GT(count_colour(image, kSecond, 40, x0, y0, x1, y1), 100u);
  EXPECT_LT(count_colour(image, kThird, 40, x0, y0, x1, y1), 10u);
  // Without a selection: the empty state, and none of the curve colours.
  Image none = shot("curves", "--select small --metric no/such/metric");
  EXPECT_LT(count_colour(none, kFirst, 20, x0, y0, x1, y1), 60u);
}

// Runs that differ only in seed: one line in the first colour (their mean) over a translucent
// band (their minimum to maximum), and no second colour; --each-seed draws the three runs in
// three colours and no band.
TEST_F(GuiScreens, CurvesViewDrawsASeedGroupAsItsMeanOverItsBand) {
  const std::string home = "/tmp/tfw-test-gui-seeds-" + std::to_string(::getpid());
  fs::remove_all(home);
  Result run = tfw("run " TFW_SOURCE_DIR "/tests/data/tiny-seeds.toml --only 'baseline*' --home " + home);
  ASSERT_EQ(run.code, 0) << run.output;
  const std::string select = "--select baseline-s0,baseline-s1,baseline-s2 --x steps --metric train/loss";
  Image grouped = shot("curves", select, home);
  fs::copy_file(kShots + "/curves.png", kShots + "/curves-grouped.png", fs::copy_options::overwrite_existing);
  Image each = shot("curves", select + " --each-seed", home);
  fs::remove_all(home);
  const int x0 = 80, y0 = 80, x1 = 1180, y1 = 690;
  // The band: the blue (68, 119, 170) at alpha 56/255 over the plot's (22, 24, 28).
  const auto band = [&](const Image& image) { return image.count_near(32, 45, 59, 6, x0, y0, x1, y1); };
  EXPECT_GT(count_colour(grouped, kFirst, 40, x0, y0, x1, y1), 100u) << kShots << "/curves-grouped.png";
  EXPECT_LT(count_colour(grouped, kSecond, 40, x0, y0, x1, y1), 10u);
  EXPECT_LT(count_colour(grouped, kThird, 40, x0, y0, x1, y1), 10u);
  EXPECT_GT(band(grouped), 5000u) << kShots << "/curves-grouped.png";  // 19,157 when written
  EXPECT_GT(count_colour(each, kSecond, 40, x0, y0, x1, y1), 100u) << kShots << "/curves.png";
  EXPECT_GT(count_colour(each, kThird, 40, x0, y0, x1, y1), 100u);
  EXPECT_LT(band(each), 1000u);  // 208 when written: the edges of the blue line
}

// The cumulative-tokens axis: `grown` continues where `small` ended, in small's colour (one
// lineage, one line), and a growth marker stands at the join; on the tokens axis both start at
// the left, and so does the marker. (Both ran 20 steps of the same batch: the same tokens each.)
TEST_F(GuiScreens, CurvesCumulativeTokensContinueAGrownRunWhereItsParentEnded) {
  const std::string select = "--select small,grown --metric train/loss --x ";
  Image cumulative = shot("curves", select + "cumulative_tokens");
  fs::copy_file(kShots + "/curves.png", kShots + "/curves-cumulative-tokens.png", fs::copy_options::overwrite_existing);
  Image tokens = shot("curves", select + "tokens");
  const int x0 = 80, y0 = 80, x1 = 1180, y1 = 690;
  // The growth marker: a dashed vertical line in the lineage's blue, translucent and
  // anti-aliased (so any blue hue), below the legend, which lies at the top.
  const int below_legend = y0 + (y1 - y0) / 4;
  auto blue_in_column = [&](const Image& image, int x) {
    std::size_t n = 0;
    for (int y = below_legend; y < y1; ++y) {
      const unsigned char* p = image.at(x, y);
      n += p[2] >= 100 && p[2] > p[0] + 40 && p[1] > p[0] + 20;
    }
    return n;
  };
  int marker = -1;
  std::size_t most = 0;
  for (int x = x0; x < x1; ++x) {
    if (const std::size_t n = blue_in_column(cumulative, x); n > most) most = n, marker = x;
  }
  ASSERT_GT(most, 100u) << "no growth marker in " << kShots << "/curves-cumulative-tokens.png";
  // Cumulative: the marker stands where small ended, 5,120 tokens, mid-plot. On the tokens axis
  // grown starts at 0 tokens, at the axis itself: nothing stands in that column.
  EXPECT_GT(marker, x0 + (x1 - x0) / 4) << "marker at x " << marker;
  EXPECT_LT(blue_in_column(tokens, marker), 30u) << kShots << "/curves.png, marker at x " << marker;
  // small reaches the marker from the left; grown's own line begins one training step (256
  // tokens, some 25 px) to its right, in the same colour, and nothing is drawn between.
  EXPECT_GT(count_colour(cumulative, kFirst, 40, marker - 6, below_legend, marker, y1), 0u) << "marker at x " << marker;
  EXPECT_EQ(count_colour(cumulative, kFirst, 40, marker + 2, below_legend, marker + 12, y1), 0u)
      << "marker at x " << marker;
  EXPECT_GT(count_colour(cumulative, kFirst, 40, marker + 2, below_legend, marker + 60, y1), 0u)
      << "marker at x " << marker;
  EXPECT_LT(count_colour(cumulative, kSecond, 40, x0, y0, x1, y1), 10u);  // one lineage, one colour
}

TEST_F(GuiScreens, FlopsViewPlotsTheFormulaForEachConfig) {
  Image image =
      shot("flops", "--config " TFW_SOURCE_DIR "/experiments/mini/e2-tokenformer-grown.toml --config " TFW_SOURCE_DIR
                    "/experiments/mini/e2-transformer-grown.toml");
  EXPECT_GT(count_colour(image, kFirst, 40, 300, 80, 1190, 700), 100u);
  EXPECT_GT(count_colour(image, kSecond, 40, 300, 80, 1190, 700), 100u);
}

TEST_F(GuiScreens, AttentionViewDrawsTheHeatMapOfACheckpoint) {
  Image image =
      shot("attention", "--select grown --text 'In the beginning God created' --layer 1 --proj ffn --token 3");
  // Heat-map cells are filled with colours from the ramp: count pixels exactly on it.
  std::set<std::uint32_t> ramp;
  for (int k = 0; k <= 4096; ++k) {
    const tfw::Rgb c = tfw::heat_colour(k / 4096.0);
    ramp.insert(c.r << 16 | c.g << 8 | c.b);
  }
  std::size_t on_ramp = 0;
  for (std::size_t i = 0; i < image.rgb.size(); i += 3)
    on_ramp += ramp.count(image.rgb[i] << 16 | image.rgb[i + 1] << 8 | image.rgb[i + 2]);
  EXPECT_GT(on_ramp, 20000u);  // 28 tokens × 64 parameter tokens × 6 px × 19 px, less what scrolls out
  // The grown layer's boundary between its created and its appended tokens: a 2 px cyan line
  // down the visible rows (issue 37; the CLI's PNG marks it too).
  EXPECT_GT(image.count_near(90, 220, 255, 0), 100u);  // none without a boundary
  // No image: exact black appears only where an image classifier's image is drawn (below).
  std::size_t black = 0;
  for (std::size_t i = 0; i < image.rgb.size(); i += 3)
    black += image.rgb[i] == 0 && image.rgb[i + 1] == 0 && image.rgb[i + 2] == 0;
  EXPECT_LT(black, 100u);
}

// A layer grown three times (twice offline, once by an event inside a run: tests/data/twice-grown.toml):
// the map draws a cyan line after each stage but the last, 16 tokens apart, and the stage names
// above the indices. The selection box stands on token 32, right of a boundary, and hides none.
TEST_F(GuiScreens, AttentionViewMarksEveryGrowthBoundaryOfTheLineage) {
  const std::string home = "/tmp/tfw-test-gui-stages-" + std::to_string(::getpid());
  ASSERT_EQ(tfw::test::trained_home(TFW_BINARY " run " TFW_SOURCE_DIR "/tests/data/twice-grown.toml --home $H", home),
            "");
  Image image = shot("attention", "--select grown2 --text 'In the beginning' --layer 0 --proj q --token 32", home);
  fs::copy_file(kShots + "/attention.png", kShots + "/attention-stages.png", fs::copy_options::overwrite_existing);
  fs::remove_all(home);
  // The columns that hold a cyan line down the rows (16 input tokens), grouped where adjacent.
  std::vector<int> lines;
  for (int x = 0; x < image.width; ++x) {
    if (image.count_near(90, 220, 255, 30, x, 0, x + 1, image.height) < 150) continue;
    if (lines.empty() || x > lines.back() + 3) lines.push_back(x);
  }
  ASSERT_EQ(lines.size(), 3u) << kShots << "/attention-stages.png";
  // 16 tokens of 6 px between each two (the default cell width).
  EXPECT_NEAR(lines[1] - lines[0], 96, 2);
  EXPECT_NEAR(lines[2] - lines[1], 96, 2);
}

// A vision Tokenformer's checkpoint (a few steps on Fashion-MNIST): the attention view shows
// the heat map of its patch tokens, and below it the validation image in grey with the patch
// grid, and the image under one parameter token's map. `tfw attention --image` writes the
// same map, and the patch PNG.
TEST_F(GuiScreens, AttentionViewShowsAnImageWithItsPatchGrid) {
  const std::string home = "/tmp/tfw-test-gui-vision";
  fs::remove_all(home);
  fs::create_directories(home);
  {
    std::ofstream config(home + "/vision.toml");
    config << "family = \"vision_tokenformer\"\n[model]\nlayers = 2\nd = 32\nheads = 4\nn_attn = 16\nn_ffn = 48\n"
              "[train]\nbatch_size = 32\nmax_steps = 10\neval_every = 10\neval_batches = 2\ncheckpoint_every = 10\n";
  }
  Result trained = tfw("train " + home + "/vision.toml --name vision --home " + home);
  ASSERT_EQ(trained.code, 0) << trained.output;
  const std::string checkpoint = home + "/runs/vision/checkpoints/step-00000010.safetensors";
  Image image = shot("attention", "--checkpoint " + checkpoint + " --image 3 --layer 1 --proj ffn --token 5", home);
  fs::copy_file(kShots + "/attention.png", kShots + "/attention-image.png", fs::copy_options::overwrite_existing);
  // The image is drawn large: its background (pixel 0, Fashion-MNIST's black) is exact black,
  // which nothing else in the window uses (the text map's screenshot has none).
  std::size_t black = 0;
  for (std::size_t i = 0; i < image.rgb.size(); i += 3)
    black += image.rgb[i] == 0 && image.rgb[i + 1] == 0 && image.rgb[i + 2] == 0;
  EXPECT_GT(black, 10000u) << kShots << "/attention-image.png";
  // The CLI: the same image, its 4×4 patch grid, token 5's scores; and the patch PNG.
  Result cli = tfw("attention " + checkpoint + " --home " + home +
                   " --image 3 --layer 1 --proj ffn --token 5 --json --out " + home + "/map");
  ASSERT_EQ(cli.code, 0) << cli.output;
  const nlohmann::json json = nlohmann::json::parse(cli.out);
  EXPECT_EQ(json["input_tokens"], 17);
  EXPECT_EQ(json["image"]["rows"], 4);
  EXPECT_EQ(json["image"]["parameter_token"], 5);
  EXPECT_EQ(json["image"]["label"], 1);  // the 4th test image of Fashion-MNIST is a trouser
  Image patches;
  ASSERT_TRUE(patches.load(home + "/map-patches.png"));
  EXPECT_EQ(patches.width, json["patches_png_layout"]["width"].get<int>());
  // A text input is refused for an image model, with the fix.
  Result text = tfw("attention " + checkpoint + " --home " + home + " --text hello");
  EXPECT_EQ(text.code, 2);
  EXPECT_NE(text.output.find("--image"), std::string::npos) << text.output;
}

TEST_F(GuiScreens, DesignerViewPredictsAndCharts) {
  Image image = shot("designer", "--config " TFW_SOURCE_DIR "/experiments/mini/quickstart-tokenformer.toml");
  EXPECT_GT(count_colour(image, kFirst, 40, 600, 100, 1190, 740), 100u);   // the schedule line
  EXPECT_GT(count_colour(image, kSecond, 40, 600, 100, 1190, 740), 100u);  // from scratch
}

TEST_F(GuiScreens, EmptyAndNewerStoresRenderTheirStates) {
  const std::string empty = "/tmp/tfw-test-gui-empty";
  fs::remove_all(empty);
  for (const char* view : {"runs", "curves", "flops", "attention", "designer"}) {
    SCOPED_TRACE(view);
    Image image = shot(view, "", empty);
    EXPECT_GT(image.distinct_colours(), 10u);
  }
  EXPECT_FALSE(fs::exists(empty + "/runs.db"));

  const std::string newer = "/tmp/tfw-test-gui-newer";
  fs::remove_all(newer);
  fs::create_directories(newer);
  fs::copy_file(kHome + "/runs.db", newer + "/runs.db");
  tfw::test::mark_newer_schema(newer + "/runs.db");
  const std::string before = tfw::test::file_bytes(newer + "/runs.db");
  Image image = shot("runs", "", newer);
  // The error is written in the error colour.
  EXPECT_GT(image.count_near(230, 230, 102, 30) + image.count_near(255, 115, 102, 30), 50u);
  EXPECT_EQ(tfw::test::file_bytes(newer + "/runs.db"), before);
}

// `tfw gui --connect`: the runs and curves of a service whose home this GUI cannot read.
// The GUI runs in its own mount namespace in which the service's home is an empty tmpfs, so
// everything it shows came over the socket. Its curves view is pixel for pixel the local
// one's (above the status bar, which names the source).
TEST_F(GuiScreens, ConnectShowsARemoteServicesRunsFromAHomeItCannotRead) {
  const std::string remote_home = "/tmp/tfw-test-gui-remote-home", local_home = "/tmp/tfw-test-gui-remote-local";
  fs::remove_all(remote_home);
  fs::remove_all(local_home);
  fs::create_directories(local_home);
  fs::copy(kHome, remote_home, fs::copy_options::recursive);
  tfw::service::ServeProcess service(TFW_BINARY, {"--listen", "127.0.0.1:0", "--home", remote_home});
  ASSERT_FALSE(service.address().empty()) << service.first_line();

  const std::string selection = " --view curves --select small,grown,baseline --x cumulative_flops --metric train/loss";
  auto hidden_shot = [&](const std::string& name, const std::string& arguments) {
    const std::string path = kShots + "/" + name + ".png";
    fs::remove(path);
    // Hide the service's home, check it is hidden, then run the GUI there.
    const std::string unshare = getuid() == 0 ? "unshare -m" : "unshare -rm";
    Result result = capture(unshare + " sh -c 'mount -t tmpfs tmpfs " + remote_home + " && [ -z \"$(ls -A " +
                            remote_home + ")\" ] || exit 97; exec xvfb-run -a -s \"-screen 0 1600x1000x24\" " +
                            TFW_BINARY + " gui --connect " + service.address() + " --home " + local_home +
                            " --screenshot " + path + " --size 1200 " + arguments + "'");
    EXPECT_EQ(result.code, 0) << result.output;
    Image image;
    EXPECT_TRUE(image.load(path)) << path;
    return image;
  };
  Image remote = hidden_shot("connect-curves", selection);
  ASSERT_EQ(remote.width, 1200);
  const int x0 = 80, y0 = 80, x1 = 1180, y1 = 690;
  EXPECT_GT(count_colour(remote, kFirst, 40, x0, y0, x1, y1), 200u);   // small and grown: one lineage
  EXPECT_GT(count_colour(remote, kSecond, 40, x0, y0, x1, y1), 100u);  // baseline
  Image local = shot("curves", "--select small,grown,baseline --x cumulative_flops --metric train/loss", remote_home);
  ASSERT_EQ(local.width, remote.width);
  ASSERT_EQ(local.height, remote.height);
  const std::size_t above_status = static_cast<std::size_t>(remote.height - 40) * remote.width * 3;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < above_status; ++i) differing += remote.rgb[i] != local.rgb[i];
  EXPECT_EQ(differing, 0u) << "the remote curves differ from the local ones in " << differing << " bytes";

  Image runs = hidden_shot("connect-runs", "--view runs");
  EXPECT_GT(runs.count_near(115, 217, 115, 30), 90u);  // three finished rows, in the status green
  EXPECT_FALSE(fs::exists(local_home + "/runs.db"));   // nothing was written locally

  // A service that is not there: a clear error, exit 2.
  service.stop();
  Result gone = gui("--connect " + service.address() + " --home " + local_home + " --screenshot " + kShots +
                    "/gone.png --view runs");
  EXPECT_EQ(gone.code, 2) << gone.output;
  EXPECT_NE(gone.output.find("cannot reach the service at " + service.address()), std::string::npos) << gone.output;
}

TEST_F(GuiScreens, BadOptionsAndNoDisplayAreClearErrors) {
  Result no_display = capture("env -u DISPLAY " + std::string(TFW_BINARY) + " gui --home " + kHome +
                              " --screenshot /tmp/tfw-test-gui-x.png --view runs");
  EXPECT_EQ(no_display.code, 2) << no_display.output;
  EXPECT_NE(no_display.output.find("no X display"), std::string::npos) << no_display.output;
  EXPECT_NE(no_display.output.find("xvfb-run"), std::string::npos) << no_display.output;
  Result unknown = gui("--home " + kHome + " --screenshot /tmp/tfw-test-gui-x.png --select nosuchrun");
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("--select: no run 'nosuchrun'"), std::string::npos) << unknown.output;
  Result view = tfw("gui --view sideways");
  EXPECT_EQ(view.code, 2);
}

TEST_F(GuiScreens, AttentionCommandWritesCsvAndPngThatAgree) {
  const std::string out = kShots + "/map";
  Result result = tfw("attention grown --home " + kHome + " --text 'the Lord' --layer 0 --proj q --out " + out +
                      " --token 5 --top 3 --json");
  ASSERT_EQ(result.code, 0) << result.output;
  nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["label"], "layers.0.q");
  EXPECT_EQ(json["input_tokens"], 8);       // byte tokens
  EXPECT_EQ(json["parameter_tokens"], 32);  // the grown stage's n_attn
  EXPECT_EQ(json["contexts"].size(), 3u);
  // CSV: a header and one row per input token; the row's largest column is the JSON's strongest.
  std::ifstream csv(out + ".csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("position,token,p0,p1,", 0), 0u);
  for (int row = 0; row < 8; ++row) {
    ASSERT_TRUE(std::getline(csv, line));
    std::vector<double> values;
    std::stringstream cells(line.substr(line.rfind('"') + 2));
    for (std::string cell; std::getline(cells, cell, ',');) values.push_back(std::stod(cell));
    ASSERT_EQ(values.size(), 32u);
    const auto best = std::max_element(values.begin(), values.end()) - values.begin();
    EXPECT_EQ(best, json["strongest"][row]["parameter_token"].get<long>());
    EXPECT_NEAR(values[best], json["strongest"][row]["score"].get<double>(), 1e-6);
  }
  // The PNG: a titled, labelled heat map whose cells have the CSV's colours, a mark where the
  // 16 grown tokens begin (the stage was grown from n_attn 16), and a colour bar.
  EXPECT_EQ(json["tokens_at_creation"], 16);
  const nlohmann::json layout = json["png_layout"];
  EXPECT_TRUE(layout["labelled"].get<bool>());
  EXPECT_EQ(layout["cell_width"], 8);  // 8 px per parameter token
  EXPECT_EQ(layout["cell_height"], 14);
  Image png;
  ASSERT_TRUE(png.load(out + ".png"));
  EXPECT_EQ(png.width, layout["width"].get<int>());
  EXPECT_EQ(png.height, layout["height"].get<int>());
  EXPECT_GT(layout["x"].get<int>(), 20);  // room for the row labels
  EXPECT_GT(layout["y"].get<int>(), 30);  // room for the title
  using tfw::heat_colour;
  using tfw::Rgb;
  std::vector<double> all;
  std::ifstream again(out + ".csv");
  std::getline(again, line);
  std::vector<std::vector<double>> grid;
  for (std::string row; std::getline(again, row);) {
    std::vector<double> values;
    std::stringstream cells(row.substr(row.rfind('"') + 2));
    for (std::string cell; std::getline(cells, cell, ',');) values.push_back(std::stod(cell));
    all.insert(all.end(), values.begin(), values.end());
    grid.push_back(values);
  }
  const auto [low, high] = std::minmax_element(all.begin(), all.end());
  for (std::size_t i = 0; i < grid.size(); ++i) {
    for (std::size_t j = 0; j < grid[i].size(); j += 7) {
      const int x = layout["x"].get<int>() + static_cast<int>(j) * 8 + 4;
      const int y = layout["y"].get<int>() + static_cast<int>(i) * 14 + 7;
      const Rgb expected = heat_colour((grid[i][j] - *low) / (*high - *low));
      const unsigned char* p = png.at(x, y);
      EXPECT_NEAR(p[0], expected.r, 2) << i << "," << j;
      EXPECT_NEAR(p[1], expected.g, 2) << i << "," << j;
      EXPECT_NEAR(p[2], expected.b, 2) << i << "," << j;
    }
  }

  Result transformer = tfw("attention baseline --home " + kHome + " --text hi");
  EXPECT_EQ(transformer.code, 2);
  EXPECT_NE(transformer.output.find("has no Pattention layers"), std::string::npos) << transformer.output;
  fs::create_directories("/tmp/tfw-test-gui-norun/checkpoints");
  Result none = tfw("attention /tmp/tfw-test-gui-norun --home " + kHome + " --text hi");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.output.find("has no complete checkpoint in /tmp/tfw-test-gui-norun/checkpoints"), std::string::npos)
      << none.output;
}

}  // namespace
