// FLOPs against sequence length (paper Table 3, Fig. 5): the forward FLOPs per token of
// chosen run configs from the engine's formulas (token-parameter, token-token, embedding)
// over T = 64 ... 64k on log axes, e.g. a Transformer growing d beside a Tokenformer
// growing n at matched parameters; and forward time per token measured on this machine
// (the engine's forward_timing, the same as `tfw flops --measure`) as points.
#include <imgui.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/commands/measure.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "workbench/gui/app.h"
#include "workbench/gui/plot.h"

namespace tfw::gui {

namespace {

const char* kModes[] = {"forward FLOPs per token", "token-token FLOPs per token", "token-token share of forward (%)"};

struct Curve {
  std::string path, label, error;
  std::shared_ptr<const ModelSpec> spec;
  ModelConfig config;
  std::vector<double> lengths, values;
  std::vector<double> measured_lengths, measured_us;  // forward µs per token
};

class FlopsPanel : public LazyPanel {
 public:
  const char* name() const override { return "flops"; }
  const char* title() const override { return "FLOPs vs length"; }

  void draw_view(App& app) override {
    // As wide as the longest entry (a checkbox, its name, a scroll bar), within a third of
    // the window: names are not clipped.
    float list_width = ImGui::CalcTextSize("Run configs (?)").x;
    for (const std::string& path : app.config_files())
      list_width = std::max(list_width, ImGui::CalcTextSize(path.c_str()).x);
    for (const auto& [path, curve] : chosen_) list_width = std::max(list_width, ImGui::CalcTextSize(path.c_str()).x);
    list_width = std::min(list_width + ImGui::GetFrameHeight() + 40, ImGui::GetContentRegionAvail().x / 3);
    ImGui::BeginChild("configs", ImVec2(list_width, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
    ImGui::TextUnformatted("Run configs");
    help_marker(
        "Config files under ./experiments. The E2 pair (experiments/mini/e2-*) compares a Tokenformer growing "
        "its parameter tokens at fixed d with a Transformer growing d, matched in parameters.");
    for (const auto& [key, curve] : chosen_) {  // runs chosen with --select or in the runs browser
      if (key.rfind("run:", 0) != 0) continue;
      bool on = true;
      if (ImGui::Checkbox(key.c_str(), &on) && !on) {
        chosen_.erase(key);
        break;
      }
    }
    for (const std::string& path : app.config_files()) {
      bool on = chosen_.count(path) > 0;
      const std::string short_name = path.rfind("experiments/", 0) == 0 ? path.substr(12) : path;
      if (ImGui::Checkbox(short_name.c_str(), &on)) {
        if (on)
          add(app, path);
        else
          chosen_.erase(path);
      }
    }
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("plots");
    ImGui::SetNextItemWidth(260);
    ImGui::Combo("y", &mode_, kModes, IM_ARRAYSIZE(kModes));
    ImGui::SameLine();
    const bool busy = measuring_.valid() && measuring_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    ImGui::BeginDisabled(busy || chosen_.empty());
    if (ImGui::Button(busy ? "measuring..." : "measure on this machine")) start_measuring(app);
    ImGui::EndDisabled();
    help_marker(
        "Times no-grad forward passes of each chosen model (random weights) at T = 256, 1024, 4096 up to its "
        "context, as `tfw flops --measure` does. Runs in the background.");
    if (measuring_.valid() && !busy) collect();
    for (const auto& [path, curve] : chosen_) {
      if (!curve.error.empty())
        ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s: %s", path.c_str(), curve.error.c_str());
    }
    Plot plot;
    plot.id = "flops";
    plot.x_label = "sequence length T";
    plot.y_label = kModes[mode_];
    plot.log_x = true;
    plot.log_y = mode_ != 2;
    plot.empty_text = "tick run configs on the left";
    std::size_t k = 0;
    for (auto& [path, curve] : chosen_) {
      if (!curve.spec) continue;
      curve.values.clear();
      for (double T : curve.lengths) {
        const FlopsPerToken f = curve.spec->flops_per_token(static_cast<std::int64_t>(T));
        const double forward = static_cast<double>(f.forward()), tt = static_cast<double>(f.token_token);
        curve.values.push_back(mode_ == 0 ? forward : mode_ == 1 ? tt : 100.0 * tt / forward);
      }
      plot.lines.push_back({curve.label, &curve.lengths, &curve.values, series_colour(k++), 2.0f, false,
                            static_cast<std::uint64_t>(mode_)});
    }
    const float height = ImGui::GetContentRegionAvail().y;
    const bool measured =
        std::any_of(chosen_.begin(), chosen_.end(), [](const auto& c) { return !c.second.measured_us.empty(); });
    plot_draw(plot, ImVec2(0, measured ? height * 0.6f : 0));
    if (measured) {
      Plot times;
      times.id = "flops-measured";
      times.x_label = "sequence length T";
      times.y_label = "measured forward µs per token";
      times.log_x = true;
      times.log_y = true;
      k = 0;
      for (auto& [path, curve] : chosen_) {
        const ImU32 colour = series_colour(k++);
        if (curve.measured_us.empty()) continue;
        times.lines.push_back(
            {curve.label + " (measured)", &curve.measured_lengths, &curve.measured_us, colour, 1.0f, true});
        times.lines.push_back({"", &curve.measured_lengths, &curve.measured_us, colour, 1.0f, false});
      }
      plot_draw(times);
    }
    ImGui::EndChild();
  }

 private:
  void initialise(App& app) override {
    std::vector<std::string> wanted = app.options.configs;
    // Runs chosen with --select: their stored configs.
    if (wanted.empty() && !app.options.select.empty() && app.snapshot) {
      for (const RunRecord& run : app.snapshot->runs) {
        if (app.selected.count(run.id)) add_run(app, run);
      }
      if (!chosen_.empty()) return;
    }
    if (wanted.empty()) {
      for (const std::string& path : app.config_files()) {
        if (path.find("e2-") != std::string::npos && path.find(".sh") == std::string::npos) wanted.push_back(path);
      }
    }
    for (const std::string& path : wanted) add(app, path);
  }

  void add(App& app, const std::string& path) {
    Curve curve;
    curve.path = path;
    try {
      curve.config = model_config_load(*app.registry, path);
      curve.spec = curve.config.spec;
      curve.label = fmt::format("{} ({}, {})", curve.config.name, curve.config.family,
                                short_count(static_cast<double>(curve.spec->parameter_count())));
      for (double T = 64; T <= 65536; T *= 2) curve.lengths.push_back(T);
    } catch (const std::exception& e) {
      curve.error = e.what();
    }
    chosen_[path] = std::move(curve);
  }

  // A run from the store, by its resolved config: keyed "run:ID NAME".
  void add_run(App& app, const RunRecord& run) {
    Curve curve;
    curve.path = fmt::format("run:{} {}", run.id, run.name);
    try {
      curve.config = model_config_parse(*app.registry, toml::parse(run.config, run.name), run.name);
      curve.spec = curve.config.spec;
      curve.label = fmt::format("{} #{} ({}, {})", run.name, run.id, curve.config.family,
                                short_count(static_cast<double>(curve.spec->parameter_count())));
      for (double T = 64; T <= 65536; T *= 2) curve.lengths.push_back(T);
    } catch (const std::exception& e) {
      curve.error = e.what();
    }
    chosen_[curve.path] = std::move(curve);
  }

  void start_measuring(App& app) {
    std::vector<std::pair<std::string, ModelConfig>> configs;  // by the curve's key
    for (const auto& [path, curve] : chosen_) {
      if (curve.spec) configs.emplace_back(path, curve.config);
    }
    Registry* registry = app.registry;
    measuring_ = std::async(std::launch::async, [configs, registry] {
      std::map<std::string, std::vector<std::pair<double, double>>> out;
      for (const auto& [key, config] : configs) {
        for (std::int64_t T : {256, 1024, 4096}) {
          if (T > config.spec->shape().seq_len) continue;
          const ForwardTiming timing = forward_timing(*registry, config, T);
          out[key].push_back({static_cast<double>(T), timing.seconds_per_token * 1e6});
        }
      }
      return out;
    });
  }

  void collect() {
    try {
      for (const auto& [path, points] : measuring_.get()) {
        auto found = chosen_.find(path);
        if (found == chosen_.end()) continue;
        found->second.measured_lengths.clear();
        found->second.measured_us.clear();
        for (const auto& [T, us] : points) {
          found->second.measured_lengths.push_back(T);
          found->second.measured_us.push_back(us);
        }
      }
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }

  int mode_ = 0;
  std::map<std::string, Curve> chosen_;
  std::future<std::map<std::string, std::vector<std::pair<double, double>>>> measuring_;
  std::string error_;
};

}  // namespace

std::unique_ptr<Panel> make_flops_panel() { return std::make_unique<FlopsPanel>(); }

}  // namespace tfw::gui
