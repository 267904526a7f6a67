// `tfw attention RUN|CHECKPOINT --text ... --layer L --proj P --out FILE`: the
// parameter-attention map of one Pattention layer (input tokens × parameter tokens) as CSV
// and PNG, and optionally the validation contexts that activate one parameter token most.
// For an image classifier, `--image N`: the input tokens are the patches of validation image
// N, and FILE-patches.png shows the image with its patch grid under one parameter token's map.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "engine/commands/attention_map.h"
#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"
#include "runner/lineage.h"
#include "runner/token_stages.h"
#include "storage/store.h"
#include "workbench/cli/attention_png.h"
#include "workbench/cli/commands.h"
#include "workbench/cli/output.h"

namespace fs = std::filesystem;

namespace tfw::cli {

// `png_layout` in `tfw attention --json` (docs/cli.md): every field under its own name.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HeatmapLayout, width, height, x, y, cell_width, cell_height, labelled)

namespace {

struct AttentionArgs {
  std::string target, text, text_file, projection = "q", out, home;
  std::int64_t layer = 0;
  std::int64_t parameter_token = -1;
  std::int64_t image = -1;  // an image classifier's validation image
  int top = 10;
  bool json = false;
};

std::string csv_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void write_csv(const AttentionMap& map, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("cannot write {}", path));
  out << "position,token";
  for (std::int64_t j = 0; j < map.parameter_tokens; ++j) out << ",p" << j;
  out << "\n";
  for (std::size_t i = 0; i < map.tokens.size(); ++i) {
    out << i << "," << csv_quote(map.tokens[i]);
    for (std::int64_t j = 0; j < map.parameter_tokens; ++j) out << "," << fmt::format("{:.8g}", map.at(i, j));
    out << "\n";
  }
  if (!out.flush()) throw Error(fmt::format("cannot write {}", path));
}

void run_attention(const AttentionArgs& args) {
  const std::string home = home_resolve(args.home);
  std::string text = args.text;
  if (!args.text_file.empty()) {
    std::ifstream in(args.text_file);
    if (!in) throw UsageError(with_hint(fmt::format("cannot read --text-file {}", args.text_file), "check the path"));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (text.empty() && args.parameter_token < 0 && args.image < 0) {
    throw UsageError(with_hint("nothing to show",
                               "give --text (or --text-file) for a map, or --token N for the "
                               "contexts that activate parameter token N; for an image "
                               "classifier, --image N"));
  }
  if (!text.empty() && args.image >= 0) throw UsageError("--text and --image exclude each other: give one input");
  const std::string checkpoint = runner::checkpoint_of(args.target, home);
  AttentionProbe probe(registry(), checkpoint, home);
  nlohmann::json json = {{"checkpoint", fs::absolute(checkpoint).string()}, {"family", probe.family()}};
  if (probe.image_model() && args.image < 0) {
    throw UsageError(
        with_hint(fmt::format("{} is an image classifier: its input is an image", checkpoint),
                  fmt::format("give --image N, an image of the validation split (0..{})", probe.images() - 1)));
  }
  if (!text.empty() || args.image >= 0) {
    AttentionMap map = args.image >= 0 ? probe.image_map(args.image, args.layer, args.projection)
                                       : probe.map(text, args.layer, args.projection);
    // An image: the parameter token mapped over the patches is --token, else the one with the
    // largest total score over the patches.
    const std::int64_t mapped = args.parameter_token >= 0 ? args.parameter_token : map.strongest_over_patches();
    if (map.image && mapped >= map.parameter_tokens) {
      throw UsageError(with_hint(
          fmt::format("parameter token {} does not exist: {} has {} tokens", mapped, map.label, map.parameter_tokens),
          fmt::format("pick 0..{}", map.parameter_tokens - 1)));
    }
    if (map.image) {
      const AttentionImage& image = *map.image;
      json["image"] = {{"index", image.index},     {"label", image.label},     {"predicted", image.predicted},
                       {"rows", image.rows},       {"cols", image.cols},       {"patch", image.patch},
                       {"leading", image.leading}, {"parameter_token", mapped}};
      nlohmann::json grid = nlohmann::json::array();
      for (std::int64_t r = 0; r < image.rows; ++r) {
        std::vector<float> row;
        for (std::int64_t c = 0; c < image.cols; ++c) {
          row.push_back(map.at(static_cast<std::size_t>(image.leading + r * image.cols + c), mapped));
        }
        grid.push_back(row);
      }
      json["image"]["patch_scores"] = grid;
    }
    json["label"] = map.label;
    json["input_tokens"] = map.tokens.size();
    json["parameter_tokens"] = map.parameter_tokens;
    json["truncated"] = map.truncated;
    json["tokens_at_creation"] = map.tokens_at_creation;
    map.stages = runner::attention_stages(home, checkpoint, args.projection, map.parameter_tokens);
    json["stages"] = nlohmann::json::array();
    for (const AttentionStage& stage : map.stages)
      json["stages"].push_back({{"name", stage.name}, {"tokens", stage.tokens}});
    nlohmann::json argmax = nlohmann::json::array();
    for (std::size_t i = 0; i < map.tokens.size(); ++i) {
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < map.parameter_tokens; ++j)
        if (map.at(i, j) > map.at(i, best)) best = j;
      argmax.push_back({{"token", map.tokens[i]}, {"parameter_token", best}, {"score", map.at(i, best)}});
    }
    json["strongest"] = argmax;
    if (!args.out.empty()) {
      std::string base = args.out;
      for (const char* ext : {".csv", ".png"}) {
        if (fs::path(base).extension() == ext) base = (fs::path(base).parent_path() / fs::path(base).stem()).string();
      }
      if (fs::path(base).has_parent_path()) fs::create_directories(fs::path(base).parent_path());
      write_csv(map, base + ".csv");
      // The run is the checkpoint's run folder (…/RUN/checkpoints/step-N.safetensors), else the target.
      const fs::path checkpoint_path(checkpoint);
      const std::string run = checkpoint_path.parent_path().filename() == "checkpoints"
                                  ? checkpoint_path.parent_path().parent_path().filename().string()
                                  : args.target;
      const std::string title =
          fmt::format("{} \u00b7 {} \u00b7 layer {} \u00b7 {} ({})", run, checkpoint_path.filename().string(),
                      args.layer, args.projection, map.label);
      const HeatmapLayout layout = attention_png_write(map, title, base + ".png");
      json["csv"] = base + ".csv";
      json["png"] = base + ".png";
      if (map.image) {
        const HeatmapLayout patches = attention_patches_png_write(map, mapped, title, base + "-patches.png");
        json["patches_png"] = base + "-patches.png";
        json["patches_png_layout"] = {{"width", patches.width},
                                      {"height", patches.height},
                                      {"x", patches.x},
                                      {"y", patches.y},
                                      {"cell", patches.cell_width}};
      }
      json["png_layout"] = layout;
    }
    if (!args.json) {
      fmt::print("{}  {}  {} input tokens × {} parameter tokens{}\n", checkpoint, map.label, map.tokens.size(),
                 map.parameter_tokens,
                 map.truncated ? fmt::format(" (text cut to the model's {} tokens)", probe.context()) : "");
      if (map.image) {
        const AttentionImage& image = *map.image;
        fmt::print("validation image {}: label {}, predicted {}; parameter token {} over the {}×{} patches:\n",
                   image.index, image.label, image.predicted, mapped, image.rows, image.cols);
        for (const auto& row : json["image"]["patch_scores"]) {
          std::string line = "   ";
          for (const auto& value : row) line += fmt::format(" {:>8.4f}", value.get<float>());
          fmt::print("{}\n", line);
        }
        if (image.leading > 0) fmt::print("    class token: {:.4f}\n", map.at(0, mapped));
      }
      fmt::print("{:>5}  {:<16} {:>10} {:>9}\n", "pos", "token", "strongest", "score");
      for (std::size_t i = 0; i < map.tokens.size(); ++i) {
        fmt::print("{:>5}  {:<16} {:>10} {:>9.4f}\n", i, "'" + token_label(map.tokens[i]) + "'",
                   argmax[i]["parameter_token"].get<std::int64_t>(), argmax[i]["score"].get<float>());
      }
      if (json.contains("csv"))
        fmt::print("wrote {} and {}\n", json["csv"].get<std::string>(), json["png"].get<std::string>());
      if (json.contains("patches_png")) fmt::print("wrote {}\n", json["patches_png"].get<std::string>());
    }
  }
  if (args.parameter_token >= 0 && args.image < 0) {
    std::vector<ActivatingContext> contexts =
        probe.top_contexts(args.layer, args.projection, args.parameter_token, args.top);
    nlohmann::json list = nlohmann::json::array();
    if (!args.json)
      fmt::print("validation contexts that activate layers.{}.{} parameter token {} most:\n", args.layer,
                 args.projection, args.parameter_token);
    for (const ActivatingContext& c : contexts) {
      list.push_back(
          {{"before", c.before}, {"token", c.token}, {"after", c.after}, {"score", c.score}, {"position", c.position}});
      if (!args.json)
        fmt::print("  {:>8.4f}  …{}[{}]{}…\n", c.score, token_label(c.before), token_label(c.token),
                   token_label(c.after));
    }
    json["contexts"] = list;
  }
  if (args.json) print_json(json);
}

}  // namespace

void add_attention_command(CLI::App& app) {
  auto args = std::make_shared<AttentionArgs>();
  CLI::App* command = app.add_subcommand(
      "attention", "Parameter-attention map of a Pattention layer: input tokens × parameter tokens (CSV and PNG)");
  command
      ->add_option("target", args->target,
                   "a checkpoint (.safetensors), a run folder, or a run id or name in the store")
      ->required();
  command->add_option("--text", args->text, "the input text");
  command->add_option("--text-file", args->text_file, "read the input text from a file");
  command
      ->add_option("--image", args->image,
                   "an image classifier's input: image N of its run's validation split (its tokens are the patches)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--layer", args->layer, "layer index (0-based)")->check(CLI::NonNegativeNumber);
  command->add_option("--proj", args->projection, "projection: q, k, v, o or ffn")
      ->check(CLI::IsMember({"q", "k", "v", "o", "ffn"}));
  command->add_option("--out", args->out, "write FILE.csv and FILE.png");
  command->add_option("--token", args->parameter_token,
                      "also list the validation contexts that activate this parameter token most; with --image, the "
                      "parameter token to map over the patches");
  command->add_option("--top", args->top, "how many contexts (default 10)")->check(CLI::PositiveNumber);
  add_home_option(command, args->home);
  command->add_flag("--json", args->json, "machine-readable output");
  command->callback([args] { run_attention(*args); });
}

}  // namespace tfw::cli
