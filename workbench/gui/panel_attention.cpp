// Parameter-attention maps: pick a run's checkpoint, a layer and a projection (q, k, v, o,
// ffn), type text; the heat map shows Θ(S) (input tokens × parameter tokens) with the tokens
// as row labels, scrollable across thousands of parameter tokens (only visible cells are
// drawn). Click a column for the validation-text contexts that activate that parameter
// token most. For an image classifier (vision_tokenformer) the input is a validation image
// and its tokens are the patches: below the heat map, the image with its patch grid and the
// clicked parameter token's scores over the patches. The engine work
// (engine/commands/attention_map.h, the same as `tfw attention`) runs off the UI thread.
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>

#include <fmt/format.h>

#include "engine/commands/attention_map.h"
#include "engine/checkpoint/checkpoint_meta.h"
#include "runner/token_stages.h"
#include "workbench/colormap.h"
#include "workbench/gui/app.h"

namespace fs = std::filesystem;

namespace tfw::gui {

namespace {

const char* kProjections[] = {"q", "k", "v", "o", "ffn"};

// The families whose models have parameter tokens to look at.
bool has_parameter_tokens(const std::string& family) {
  return family == "tokenformer" || family == "vision_tokenformer";
}

ImU32 heat(double t) {
  const Rgb c = heat_colour(t);
  return IM_COL32(c.r, c.g, c.b, 255);
}

template <typename T>
bool ready(const std::future<T>& f) {
  return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

class AttentionPanel : public LazyPanel {
 public:
  const char* name() const override { return "attention"; }
  const char* title() const override { return "Parameter attention"; }

  void draw_view(App& app) override {
    collect();
    if (open_given_) {  // --checkpoint: its map at once, as the screenshot shows it
      open_given_ = false;
      start_map(app);
    }
    source_picker(app);
    ImGui::SetNextItemWidth(120);
    ImGui::SliderInt("layer", &layer_, 0, std::max(0, layers_ - 1));
    ImGui::SameLine();
    ImGui::SetNextItemWidth(80);
    ImGui::Combo("projection", &projection_, kProjections, IM_ARRAYSIZE(kProjections));
    ImGui::SameLine();
    ImGui::SetNextItemWidth(120);
    ImGui::SliderInt("cell width", &cell_w_, 2, 24);
    if (image_mode_) {
      ImGui::SetNextItemWidth(160);
      ImGui::InputInt("validation image", &image_, 1, 10);
      image_ = std::max(0, image_);
      ImGui::SameLine();
    } else {
      ImGui::InputTextMultiline("##text", text_, sizeof(text_), ImVec2(-160, ImGui::GetTextLineHeight() * 3));
      ImGui::SameLine();
    }
    const bool busy = job_.valid() || contexts_job_.valid();
    ImGui::BeginDisabled(busy || checkpoint_.empty());
    if (ImGui::Button(busy ? "computing..." : "compute map", ImVec2(150, 0))) start_map(app);
    ImGui::EndDisabled();
    if (!error_.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", error_.c_str());
    if (map_.tokens.empty()) {
      if (error_.empty()) {
        ImGui::TextDisabled("%s", checkpoint_.empty()
                                      ? "Select a tokenformer or vision_tokenformer run with a checkpoint "
                                        "(Runs tab), or pass --checkpoint FILE."
                                  : image_mode_ ? "Choose a validation image and press 'compute map'."
                                                : "Type some text and press 'compute map'.");
      }
      return;
    }
    heat_map();
    if (map_.image) {
      patches();
    } else {
      contexts();
    }
  }

  void prepare(App& app) override {
    initialise_once(app);
    if (checkpoint_.empty()) return;
    open_given_ = false;  // computed here, for the screenshot
    start_map(app);
    job_.wait();
    collect();
    if (map_.image && app.options.parameter_token >= 0) chosen_token_ = app.options.parameter_token;
    if (app.options.parameter_token >= 0 && error_.empty() && !map_.image) {
      chosen_token_ = app.options.parameter_token;
      start_contexts();
      contexts_job_.wait();
      collect();
    }
  }

 private:
  struct Result {
    std::shared_ptr<AttentionProbe> probe;
    AttentionMap map;
    std::vector<ActivatingContext> contexts;
    std::string error;
  };

  void initialise(App& app) override {
    const std::string text = app.options.text.empty() ? "The cat sat on the mat. " : app.options.text;
    std::snprintf(text_, sizeof(text_), "%s", text.c_str());
    layer_ = app.options.layer;
    image_ = app.options.image;
    for (int k = 0; k < IM_ARRAYSIZE(kProjections); ++k) {
      if (app.options.projection == kProjections[k]) projection_ = k;
    }
    if (!app.options.checkpoint.empty()) {
      checkpoint_ = app.options.checkpoint;
      open_given_ = true;
      return;
    }
    for (std::int64_t id : app.selected) {
      const RunRecord* run = app.run(id);
      if (run && has_parameter_tokens(run->family) && choose_run(app, *run)) return;
    }
  }

  // The run's newest checkpoint; false (with the reason in error_) when it has none.
  bool choose_run(const App& app, const RunRecord& run) {
    run_ = run.id;
    image_mode_ = run.family == "vision_tokenformer";
    if (app.snapshot->remote) {  // the checkpoint files are on the service's machine
      checkpoints_.clear();
      checkpoint_.clear();
      error_ = fmt::format(
          "run {} ({}) is on {}: its checkpoints are files in {}/checkpoints on that machine. "
          "The attention view reads checkpoint files: open it there, or copy one here and pass "
          "--checkpoint FILE.",
          run.id, run.name, app.snapshot->source, run.run_dir);
      return false;
    }
    checkpoints_ = checkpoint_list(run.run_dir + "/checkpoints");
    if (checkpoints_.empty()) {
      checkpoint_.clear();
      error_ = fmt::format("run {} ({}) has no complete checkpoint in {}/checkpoints", run.id, run.name, run.run_dir);
      return false;
    }
    checkpoint_ = checkpoints_.back().path;
    error_.clear();
    return true;
  }

  void source_picker(App& app) {
    const RunRecord* current = app.run(run_);
    const std::string label = current                ? fmt::format("{} #{}", current->name, current->id)
                              : !checkpoint_.empty() ? fmt::format("file {}", fs::path(checkpoint_).filename().string())
                                                     : "choose a run";
    ImGui::SetNextItemWidth(260);
    if (ImGui::BeginCombo("run", label.c_str())) {
      for (const RunRecord& run : app.snapshot->runs) {
        if (!has_parameter_tokens(run.family)) continue;
        if (ImGui::Selectable(fmt::format("{} #{} ({})", run.name, run.id, run.experiment).c_str(), run.id == run_)) {
          choose_run(app, run);
          probe_.reset();
        }
      }
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(320);
    const std::string shown = checkpoint_.empty() ? "-" : fs::path(checkpoint_).filename().string();
    if (ImGui::BeginCombo("checkpoint", shown.c_str())) {
      for (const CheckpointInfo& info : checkpoints_) {
        const std::string item = fmt::format("step {}  {}", info.step, fs::path(info.path).filename().string());
        if (ImGui::Selectable(item.c_str(), info.path == checkpoint_)) {
          checkpoint_ = info.path;
          probe_.reset();
        }
      }
      ImGui::EndCombo();
    }
  }

  void start_map(App& app) {
    error_.clear();
    auto probe = probe_;
    const std::string checkpoint = checkpoint_, text = text_, home = app.home;
    const std::int64_t layer = layer_, image = image_;
    const std::string projection = kProjections[projection_];
    Registry* registry = app.registry;
    job_ = std::async(std::launch::async, [=]() mutable {
      Result result;
      try {
        if (!probe) probe = std::make_shared<AttentionProbe>(*registry, checkpoint, home);
        result.probe = probe;
        result.map =
            probe->image_model() ? probe->image_map(image, layer, projection) : probe->map(text, layer, projection);
        result.map.stages = runner::attention_stages(home, checkpoint, projection, result.map.parameter_tokens);
      } catch (const std::exception& e) {
        result.error = e.what();
      }
      return result;
    });
  }

  void start_contexts() {
    auto probe = probe_;
    const std::int64_t layer = layer_, token = chosen_token_;
    const std::string projection = kProjections[projection_];
    contexts_job_ = std::async(std::launch::async, [=] {
      Result result;
      try {
        result.contexts = probe->top_contexts(layer, projection, token, 12);
      } catch (const std::exception& e) {
        result.error = e.what();
      }
      return result;
    });
    contexts_.clear();
  }

  void collect() {
    if (ready(job_)) {
      Result result = job_.get();
      error_ = result.error;
      if (result.probe) {
        probe_ = result.probe;
        layers_ = static_cast<int>(probe_->layers());
        image_mode_ = probe_->image_model();
      }
      if (error_.empty()) {
        map_ = std::move(result.map);
        const auto [low, high] = std::minmax_element(map_.scores.begin(), map_.scores.end());
        low_ = *low;
        high_ = *high;
      }
    }
    if (ready(contexts_job_)) {
      Result result = contexts_job_.get();
      if (!result.error.empty()) error_ = result.error;
      contexts_ = std::move(result.contexts);
    }
  }

  void heat_map() {
    const std::vector<AttentionStage> stages = map_.marked_stages();
    // A grown layer's header has a row of stage names above the token indices.
    const float row_h = ImGui::GetTextLineHeight() + 2, label_w = 130, header_h = row_h * (stages.size() >= 2 ? 2 : 1);
    const int rows = static_cast<int>(map_.tokens.size());
    const std::int64_t columns = map_.parameter_tokens;
    const std::string appended =
        stages.size() >= 2 ? attention_stages_text(stages) + " (a cyan line after each but the last)" : "";
    ImGui::Text("%s: %d input tokens × %lld parameter tokens%s%s.  Θ(S) from %.4f to %.4f", map_.label.c_str(), rows,
                static_cast<long long>(columns), appended.c_str(),
                map_.truncated ? " (text cut to the model's context)" : "", low_, high_);
    // Colour scale.
    ImDrawList* draw = ImGui::GetWindowDrawList();
    ImGui::SameLine();
    const ImVec2 bar = ImGui::GetCursorScreenPos();
    for (int i = 0; i < 120; ++i)
      draw->AddRectFilled(ImVec2(bar.x + i, bar.y + 3), ImVec2(bar.x + i + 1, bar.y + 13), heat(i / 119.0));
    ImGui::Dummy(ImVec2(124, 14));

    const float available = ImGui::GetContentRegionAvail().y;
    const float height = std::min(available * 0.65f, header_h + rows * row_h + 24);
    ImGui::SetNextWindowContentSize(ImVec2(label_w + columns * cell_w_ + 8, header_h + rows * row_h + 4));
    ImGui::BeginChild("heat", ImVec2(0, height), true, ImGuiWindowFlags_HorizontalScrollbar);
    draw = ImGui::GetWindowDrawList();
    const ImVec2 window = ImGui::GetWindowPos();
    const float scroll_x = ImGui::GetScrollX(), scroll_y = ImGui::GetScrollY();
    const float view_w = ImGui::GetWindowContentRegionMax().x;
    const ImVec2 origin(window.x - scroll_x + label_w, window.y - scroll_y + header_h);
    // Visible columns only: thousands of parameter tokens cost what fits on screen.
    const std::int64_t first = std::max<std::int64_t>(0, static_cast<std::int64_t>(scroll_x / cell_w_));
    const std::int64_t last = std::min<std::int64_t>(columns, first + static_cast<std::int64_t>(view_w / cell_w_) + 2);
    const double range = high_ > low_ ? high_ - low_ : 1.0;
    for (int i = 0; i < rows; ++i) {
      const float y = origin.y + i * row_h;
      for (std::int64_t j = first; j < last; ++j) {
        const float x = origin.x + j * cell_w_;
        draw->AddRectFilled(ImVec2(x, y), ImVec2(x + cell_w_, y + row_h), heat((map_.at(i, j) - low_) / range));
      }
    }
    if (chosen_token_ >= first && chosen_token_ < last) {
      const float x = origin.x + chosen_token_ * cell_w_;
      draw->AddRect(ImVec2(x - 1, origin.y), ImVec2(x + cell_w_ + 1, origin.y + rows * row_h),
                    IM_COL32(255, 80, 80, 255), 0, 0, 2);
    }
    // The growth boundaries, after each stage of the lineage but the last, as the CLI's PNG
    // marks them (attention_png.cpp): drawn after the selection box, which never hides one.
    for (std::size_t k = 0; k + 1 < stages.size(); ++k) {
      const std::int64_t boundary = stages[k].tokens;
      if (boundary < first || boundary > last) continue;
      const float x = origin.x + static_cast<float>(boundary) * cell_w_;
      draw->AddLine(ImVec2(x, origin.y), ImVec2(x, origin.y + rows * row_h), IM_COL32(90, 220, 255, 255), 2);
    }
    // Column header: every k-th parameter token index, pinned to the top.
    const float header_y = window.y;
    draw->AddRectFilled(ImVec2(window.x, header_y), ImVec2(window.x + view_w + label_w, header_y + header_h),
                        IM_COL32(30, 32, 38, 255));
    const std::int64_t every = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(48.0 / cell_w_)));
    for (std::int64_t j = (first / every) * every; j < last; j += every) {
      const float x = origin.x + j * cell_w_;
      if (x < window.x + label_w) continue;
      draw->AddText(ImVec2(x, header_y + header_h - row_h + 1), IM_COL32(170, 170, 170, 255),
                    std::to_string(j).c_str());
    }
    // Each stage's name over its first columns, where it fits before the next boundary.
    for (std::size_t k = 0, begin = 0; stages.size() >= 2 && k < stages.size(); begin = stages[k++].tokens) {
      const float x0 = std::max(origin.x + static_cast<float>(begin) * cell_w_, window.x + label_w) + 3;
      const float x1 = origin.x + static_cast<float>(stages[k].tokens) * cell_w_;
      if (ImGui::CalcTextSize(stages[k].name.c_str()).x + 6 <= x1 - x0)
        draw->AddText(ImVec2(x0, header_y + 1), IM_COL32(90, 220, 255, 255), stages[k].name.c_str());
    }
    // Row labels: the input tokens, pinned to the left.
    draw->AddRectFilled(ImVec2(window.x, header_y), ImVec2(window.x + label_w, origin.y + rows * row_h),
                        IM_COL32(30, 32, 38, 255));
    for (int i = 0; i < rows; ++i) {
      const std::string label = fmt::format("{:>3} {}", i, token_row_label(map_.tokens[i]));
      draw->AddText(ImVec2(window.x + 4, origin.y + i * row_h + 1), IM_COL32(220, 220, 220, 255), label.c_str());
    }
    // Hover and click.
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    if (ImGui::IsWindowHovered() && mouse.x > window.x + label_w && mouse.y > window.y + header_h) {
      const std::int64_t j = static_cast<std::int64_t>((mouse.x - origin.x) / cell_w_);
      const int i = static_cast<int>((mouse.y - origin.y) / row_h);
      if (j >= 0 && j < columns && i >= 0 && i < rows) {
        ImGui::SetTooltip("input token %d '%s'\nparameter token %lld\nscore %.5f\nclick: %s", i,
                          token_label(map_.tokens[i]).c_str(), static_cast<long long>(j), map_.at(i, j),
                          map_.image ? "its map over the patches" : "contexts that activate it");
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && probe_ && !contexts_job_.valid()) {
          chosen_token_ = j;
          contexts_requested_ = !map_.image;
        }
      }
    }
    ImGui::EndChild();
  }

  // An image classifier's input: the image with its patch grid, and the image under one
  // parameter token's scores over the patches (the clicked column, else the token with the
  // largest total over the patches).
  void patches() {
    const AttentionImage& image = *map_.image;
    const std::size_t first = static_cast<std::size_t>(image.leading);
    const std::int64_t token =
        chosen_token_ >= 0 && chosen_token_ < map_.parameter_tokens ? chosen_token_ : map_.strongest_over_patches();
    double low = 1e300, high = -1e300;
    for (std::size_t i = first; i < map_.tokens.size(); ++i)
      low = std::min<double>(low, map_.at(i, token)), high = std::max<double>(high, map_.at(i, token));
    const double range = high > low ? high - low : 1.0;
    ImGui::Text(
        "Validation image %lld: label %lld, predicted %lld.  Right: parameter token %lld over the %lld×%lld "
        "patches (%.4f to %.4f)%s",
        static_cast<long long>(image.index), static_cast<long long>(image.label),
        static_cast<long long>(image.predicted), static_cast<long long>(token), static_cast<long long>(image.rows),
        static_cast<long long>(image.cols), low, high,
        image.leading > 0 ? fmt::format("; class token {:.4f}", map_.at(0, token)).c_str() : "");
    const float available = std::max(80.0f, ImGui::GetContentRegionAvail().y - 8);
    const float pixel = std::max(1.0f, std::floor(std::min(available, 320.0f) / static_cast<float>(image.height)));
    const float side_w = pixel * static_cast<float>(image.width), side_h = pixel * static_cast<float>(image.height);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float right = origin.x + side_w + 24;
    for (std::int64_t y = 0; y < image.height; ++y) {
      for (std::int64_t x = 0; x < image.width; ++x) {
        double sum = 0;
        for (std::int64_t c = 0; c < image.channels; ++c) {
          sum += image.pixels[static_cast<std::size_t>((y * image.width + x) * image.channels + c)];
        }
        const int v = static_cast<int>(std::lround(255 * sum / static_cast<double>(image.channels)));
        const ImVec2 a(origin.x + x * pixel, origin.y + y * pixel), b(a.x + pixel, a.y + pixel);
        draw->AddRectFilled(a, b, IM_COL32(v, v, v, 255));
        const std::int64_t patch = (y / image.patch) * image.cols + x / image.patch;
        const ImVec2 a2(right + x * pixel, a.y), b2(a2.x + pixel, b.y);
        draw->AddRectFilled(a2, b2, IM_COL32(v / 3, v / 3, v / 3, 255));
        const Rgb c = heat_colour((map_.at(first + static_cast<std::size_t>(patch), token) - low) / range);
        draw->AddRectFilled(a2, b2, IM_COL32(c.r, c.g, c.b, 180));
      }
    }
    const float cell = pixel * static_cast<float>(image.patch);
    for (float left : {origin.x, right}) {
      for (std::int64_t r = 0; r <= image.rows; ++r) {
        draw->AddLine(ImVec2(left, origin.y + r * cell), ImVec2(left + side_w, origin.y + r * cell),
                      IM_COL32(90, 160, 255, 220));
      }
      for (std::int64_t c = 0; c <= image.cols; ++c) {
        draw->AddLine(ImVec2(left + c * cell, origin.y), ImVec2(left + c * cell, origin.y + side_h),
                      IM_COL32(90, 160, 255, 220));
      }
    }
    ImGui::Dummy(ImVec2(2 * side_w + 24, side_h));
  }

  void contexts() {
    if (contexts_requested_) {
      contexts_requested_ = false;
      start_contexts();
    }
    if (chosen_token_ < 0) {
      ImGui::TextDisabled(
          "Click a column of the map for the validation text that activates that parameter token most.");
      return;
    }
    ImGui::Text("Validation contexts that activate %s parameter token %lld most%s", map_.label.c_str(),
                static_cast<long long>(chosen_token_), contexts_job_.valid() ? " (computing...)" : ":");
    ImGui::BeginChild("contexts", ImVec2(0, 0), true);
    for (const ActivatingContext& c : contexts_) {
      ImGui::Text("%8.4f", c.score);
      ImGui::SameLine();
      ImGui::TextDisabled("…%s", token_label(c.before).c_str());
      ImGui::SameLine(0, 0);
      ImGui::TextColored(ImVec4(1, 0.85f, 0.3f, 1), "[%s]", token_label(c.token).c_str());
      ImGui::SameLine(0, 0);
      ImGui::TextDisabled("%s…", token_label(c.after).c_str());
    }
    ImGui::EndChild();
  }

  std::int64_t run_ = 0;
  std::vector<CheckpointInfo> checkpoints_;
  std::string checkpoint_, error_;
  char text_[4096] = "";
  int layer_ = 0, layers_ = 1, projection_ = 0, cell_w_ = 6;
  int image_ = 0;            // the validation image (image classifiers)
  bool image_mode_ = false;  // the checkpoint is an image classifier's
  bool open_given_ = false;  // --checkpoint was given: compute its map on the first draw
  std::shared_ptr<AttentionProbe> probe_;
  std::future<Result> job_, contexts_job_;
  AttentionMap map_;
  double low_ = 0, high_ = 1;
  std::int64_t chosen_token_ = -1;
  bool contexts_requested_ = false;
  std::vector<ActivatingContext> contexts_;
};

}  // namespace

std::unique_ptr<Panel> make_attention_panel() { return std::make_unique<AttentionPanel>(); }

}  // namespace tfw::gui
