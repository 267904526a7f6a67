// Runs browser: every run in the store with its status (live ones update as the store
// changes), experiment, family, parameters, tokens, cumulative FLOPs and final loss; filter,
// sort, lineage as a tree; the checkbox selects runs for the curves and attention views.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "workbench/common/first_steps.h"
#include "workbench/common/format.h"
#include "workbench/gui/app.h"

namespace tfw::gui {

namespace {

ImVec4 status_colour(RunStatus status) {
  switch (status) {
    case RunStatus::running: return ImVec4(0.35f, 0.75f, 1.0f, 1);
    case RunStatus::finished: return ImVec4(0.45f, 0.85f, 0.45f, 1);
    case RunStatus::failed: return ImVec4(1.0f, 0.4f, 0.35f, 1);
    case RunStatus::killed: return ImVec4(1.0f, 0.7f, 0.3f, 1);
    case RunStatus::crashed: return ImVec4(0.95f, 0.4f, 0.9f, 1);
    case RunStatus::queued: break;
  }
  return ImVec4(0.7f, 0.7f, 0.7f, 1);
}

// Slurm's states in the colours of the run statuses they lead to.
ImVec4 slurm_colour(const std::string& state) {
  if (state == "PENDING") return status_colour(RunStatus::queued);
  if (state == "RUNNING" || state == "COMPLETING" || state == "CONFIGURING") return status_colour(RunStatus::running);
  if (state == "COMPLETED") return status_colour(RunStatus::finished);
  if (state == "CANCELLED") return status_colour(RunStatus::killed);
  return status_colour(RunStatus::failed);  // FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, UNKNOWN, ...
}

// The status filter's entries: "any status", then every run status.
constexpr RunStatus kStatusChoices[] = {RunStatus::running, RunStatus::finished, RunStatus::failed,
                                        RunStatus::killed,  RunStatus::crashed,  RunStatus::queued};

double final_val_loss(const RunRecord& run) { return run.final_metrics.number_or_nan("val_loss"); }

class RunsPanel : public Panel {
 public:
  const char* name() const override { return "runs"; }
  const char* title() const override { return "Runs"; }

  void draw(App& app) override {
    const StoreSnapshot& snapshot = *app.snapshot;
    if (!snapshot.error.empty() && snapshot.remote) {
      empty_state("The service's runs cannot be read",
                  snapshot.error + fmt::format("\n\nRetrying every half second. Check the address and the token "
                                               "(`tfw gui --connect HOST:PORT --token-file FILE`) and that "
                                               "`tfw serve` runs there."));
      return;
    }
    if (!snapshot.error.empty()) {
      empty_state("The run store cannot be read",
                  snapshot.error + "\n\nNothing was changed. Open another TFW_HOME with `tfw gui --home DIR`.");
      return;
    }
    if (!snapshot.exists || snapshot.runs.empty()) {
      empty_state("No runs yet",
                  fmt::format("Reading {}.\n\nStart one from a terminal, in the repository's folder:\n  {}\n  {}\n"
                              "or design a schedule in the Designer tab and launch it. Runs appear here as they "
                              "start, and update live.",
                              snapshot.where(), kFirstTrainCommand, kFirstExperimentCommand));
      return;
    }
    toolbar(app, snapshot);
    table(app, snapshot);
    cluster_jobs(snapshot);
    details(app, snapshot);
  }

 private:
  void toolbar(App& app, const StoreSnapshot& snapshot) {
    ImGui::SetNextItemWidth(220);
    ImGui::InputTextWithHint("##filter", "filter: name, experiment, family", filter_, sizeof(filter_));
    ImGui::SameLine();
    ImGui::SetNextItemWidth(120);
    const char* statuses[1 + std::size(kStatusChoices)] = {"any status"};
    for (std::size_t i = 0; i < std::size(kStatusChoices); ++i) statuses[i + 1] = status_name(kStatusChoices[i]);
    ImGui::Combo("##status", &status_, statuses, IM_ARRAYSIZE(statuses));
    ImGui::SameLine();
    ImGui::Checkbox("lineage tree", &tree_);
    help_marker("Show grown runs under the run they were grown from (their parent).");
    ImGui::SameLine();
    if (ImGui::Button("select shown")) {
      for (const RunRecord* r : shown_) app.selected.insert(r->id);
    }
    ImGui::SameLine();
    if (ImGui::Button("clear selection")) app.selected.clear();
    ImGui::SameLine();
    ImGui::BeginDisabled(app.selected.empty());
    if (ImGui::Button("plot selected")) app.request_view = "curves";
    ImGui::EndDisabled();
  }

  bool passes(const RunRecord& r) const {
    if (status_ > 0 && r.status != kStatusChoices[status_ - 1]) return false;
    const std::string needle = filter_;
    if (needle.empty()) return true;
    for (const std::string* field : {&r.name, &r.experiment, &r.family}) {
      if (field->find(needle) != std::string::npos) return true;
    }
    return false;
  }

  void table(App& app, const StoreSnapshot& snapshot) {
    shown_.clear();
    std::map<std::int64_t, int> depth;
    if (tree_) {
      // Depth-first from the roots: children (grown runs) under their parents.
      std::multimap<std::int64_t, const RunRecord*> children;
      std::set<std::int64_t> ids;
      for (const RunRecord& r : snapshot.runs) ids.insert(r.id);
      for (const RunRecord& r : snapshot.runs) children.emplace(ids.count(r.parent) ? r.parent : 0, &r);
      std::function<void(std::int64_t, int)> walk = [&](std::int64_t parent, int level) {
        auto range = children.equal_range(parent);
        for (auto it = range.first; it != range.second; ++it) {
          if (passes(*it->second)) {
            shown_.push_back(it->second);
            depth[it->second->id] = level;
          }
          walk(it->second->id, level + 1);
        }
      };
      walk(0, 0);
    } else {
      for (const RunRecord& r : snapshot.runs) {
        if (passes(r)) shown_.push_back(&r);
      }
    }
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                  ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit |
                                  (tree_ ? 0 : ImGuiTableFlags_Sortable);
    // Room for the details (and their evaluation lines) and the Slurm jobs below.
    std::set<std::string> evaluated;
    for (const EvaluationRow& e : snapshot.evaluations) {
      if (e.run == focus_) evaluated.insert(e.corpus + "/" + e.blocks + "/" + std::to_string(e.step));
    }
    const float reserve = (snapshot.cluster_jobs.empty() ? 150.0f : 300.0f) +
                          (evaluated.empty() ? 0.0f : 20.0f * static_cast<float>(evaluated.size() + 1));
    const float height = std::max(160.0f, ImGui::GetContentRegionAvail().y - reserve);
    if (!ImGui::BeginTable("runs", 10, flags, ImVec2(0, height))) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("plot", ImGuiTableColumnFlags_NoSort);
    ImGui::TableSetupColumn("id", ImGuiTableColumnFlags_DefaultSort);
    ImGui::TableSetupColumn("name", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("experiment");
    ImGui::TableSetupColumn("family");
    ImGui::TableSetupColumn("status");
    ImGui::TableSetupColumn("params");
    ImGui::TableSetupColumn("tokens");
    ImGui::TableSetupColumn("cum. FLOPs");
    ImGui::TableSetupColumn("val loss");
    ImGui::TableHeadersRow();
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0 && !tree_) {
      const ImGuiTableColumnSortSpecs& spec = specs->Specs[0];
      auto key = [&](const RunRecord* r) -> std::pair<double, std::string> {
        switch (spec.ColumnIndex) {
          case 2: return {0, r->name};
          case 3: return {0, r->experiment};
          case 4: return {0, r->family};
          case 5: return {0, status_name(r->status)};
          case 6: return {static_cast<double>(r->parameters), ""};
          case 7: return {live_tokens(*r, snapshot), ""};
          case 8: return {r->cumulative_flops, ""};
          case 9: {
            const double loss = final_val_loss(*r);
            return {std::isnan(loss) ? 1e300 : loss, ""};
          }
          default: return {static_cast<double>(r->id), ""};
        }
      };
      std::stable_sort(shown_.begin(), shown_.end(), [&](const RunRecord* a, const RunRecord* b) {
        return spec.SortDirection == ImGuiSortDirection_Descending ? key(b) < key(a) : key(a) < key(b);
      });
    }
    for (const RunRecord* r : shown_) {
      ImGui::TableNextRow();
      ImGui::PushID(static_cast<int>(r->id));
      ImGui::TableNextColumn();
      bool selected = app.selected.count(r->id) > 0;
      if (ImGui::Checkbox("##sel", &selected)) {
        if (selected)
          app.selected.insert(r->id);
        else
          app.selected.erase(r->id);
      }
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(r->id));
      ImGui::TableNextColumn();
      const std::string label =
          std::string(static_cast<std::size_t>(depth[r->id]) * 3, ' ') + (depth[r->id] > 0 ? "└ " : "") + r->name;
      if (ImGui::Selectable(label.c_str(), focus_ == r->id)) focus_ = focus_ == r->id ? 0 : r->id;
      if (ImGui::IsItemHovered() && !r->growth_method.empty()) {
        const RunRecord* parent = app.run(r->parent);
        ImGui::SetTooltip("grown from %s with %s", parent ? parent->name.c_str() : "?", r->growth_method.c_str());
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r->experiment.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r->family.c_str());
      ImGui::TableNextColumn();
      ImGui::TextColored(status_colour(r->status), "%s", status_name(r->status));
      if (ImGui::IsItemHovered() && !r->error.empty()) ImGui::SetTooltip("%s", r->error.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(short_count(static_cast<double>(r->parameters)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(short_count(live_tokens(*r, snapshot)).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(fmt::format("{:.3g}", r->cumulative_flops).c_str());
      ImGui::TableNextColumn();
      const double loss = final_val_loss(*r);
      if (std::isnan(loss))
        ImGui::TextDisabled("-");
      else
        ImGui::Text("%.4f", loss);
      ImGui::PopID();
    }
    ImGui::EndTable();
  }

  // Runs submitted with `tfw run --executor slurm`, newest first, with Slurm's state (the
  // source refreshes it from squeue/sacct while some are queued or running).
  void cluster_jobs(const StoreSnapshot& snapshot) {
    if (snapshot.cluster_jobs.empty()) return;
    ImGui::TextUnformatted("Slurm jobs");
    help_marker(
        "Runs submitted with `tfw run --executor slurm`: the job, Slurm's state (from squeue, sacct or "
        "scontrol), its exit code and why it waits. `tfw jobs --slurm` lists them; `tfw cancel --slurm RUN` "
        "cancels one.");
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                  ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable("slurm", 6, flags, ImVec2(0, 120))) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    for (const char* column : {"job", "run", "experiment", "state", "exit"}) ImGui::TableSetupColumn(column);
    ImGui::TableSetupColumn("reason", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    for (auto it = snapshot.cluster_jobs.rbegin(); it != snapshot.cluster_jobs.rend(); ++it) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(it->job_id.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(it->run.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(it->experiment.c_str());
      ImGui::TableNextColumn();
      ImGui::TextColored(slurm_colour(it->state), "%s", it->state.c_str());
      ImGui::TableNextColumn();
      if (it->exit_code < 0)
        ImGui::TextDisabled("-");
      else
        ImGui::Text("%lld", static_cast<long long>(it->exit_code));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(it->reason.c_str());
    }
    ImGui::EndTable();
  }

  // The focused run (click its name): lineage, budget, error, where it lives, evaluations.
  void details(App& app, const StoreSnapshot& snapshot) {
    // The clicked run; before any click, the first ticked one (`tfw gui --select`).
    if (focus_ == 0 && !app.selected.empty()) focus_ = *app.selected.begin();
    const RunRecord* r = app.run(focus_);
    if (!r) {
      ImGui::TextDisabled("Click a run's name for its details; tick runs to plot them.");
      return;
    }
    ImGui::Text("%s  (id %lld, %s, seed %lld, commit %s on %s)", r->name.c_str(), static_cast<long long>(r->id),
                status_name(r->status), static_cast<long long>(r->seed), r->git_commit.c_str(), r->host.c_str());
    std::string chain;
    for (const RunRecord* at = r; at; at = at->parent ? app.run(at->parent) : nullptr) {
      chain = at->name + (chain.empty() ? "" : " -> " + chain);
      if (chain.size() > 400) break;
    }
    // Long values (a lineage, growth options, an error) wrap at spaces, never inside a name or a value.
    text_wrapped_at_spaces("lineage: " + chain);
    if (r->status == RunStatus::running) progress(*r, snapshot);
    ImGui::Text("own FLOPs %.3g + inherited %.3g = cumulative %.3g", r->flops, r->inherited_flops, r->cumulative_flops);
    if (!r->growth_method.empty())
      text_wrapped_at_spaces(fmt::format("grown with {} {}", r->growth_method, r->growth_options));
    ImGui::TextDisabled("%s", r->run_dir.c_str());
    if (!r->error.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1, 0.45f, 0.4f, 1));
      text_wrapped_at_spaces(r->error);
      ImGui::PopStyleColor();
    }
    evaluations(*r, snapshot);
    if (r->status == RunStatus::running && app.service) {
      if (ImGui::Button("cancel its job")) {
        try {
          const std::int64_t job = app.service->running_job_of(r->experiment);
          if (job == 0) {
            message_ = fmt::format(
                "no running job of the service runs experiment '{}' (a run started from a terminal "
                "stops with Ctrl-C there)",
                r->experiment);
          } else {
            app.service->cancel(job);
            message_ = fmt::format("job {} cancelled: its runs checkpoint and end as killed", job);
          }
        } catch (const std::exception& e) {
          message_ = e.what();
        }
      }
      help_marker("Cancels the engine-service job that runs this run's experiment.");
    }
    if (!message_.empty()) text_wrapped_at_spaces(message_);
  }

  // A run's tokens: the store's, which move only at checkpoints, or, for a running run whose
  // points the GUI reads (a ticked one), those of its latest training-loss point.
  static double live_tokens(const RunRecord& r, const StoreSnapshot& snapshot) {
    double tokens = static_cast<double>(r.tokens);
    const auto found = snapshot.data.find(r.id);
    if (r.status != RunStatus::running || found == snapshot.data.end()) return tokens;
    const Series* series = found->second->series("train/loss");
    return series && !series->tokens.empty() ? std::max(tokens, series->tokens.back()) : tokens;
  }

  // A running run's step, tokens and time left, from its training-loss points (the store's
  // tokens and FLOPs move only at checkpoints). Only for a ticked run: the watcher reads the
  // points of those.
  static void progress(const RunRecord& r, const StoreSnapshot& snapshot) {
    const auto found = snapshot.data.find(r.id);
    const Series* series = found == snapshot.data.end() ? nullptr : found->second->series("train/loss");
    if (!series || series->step.empty()) {
      ImGui::TextDisabled("progress: tick the run to follow its steps");
      return;
    }
    RunBudget budget;
    try {
      const toml::table config = toml::parse(r.config);
      budget.max_steps = config["train"]["max_steps"].value_or<std::int64_t>(0);
      budget.max_tokens = config["train"]["max_tokens"].value_or(0.0);
      budget.max_flops = config["train"]["max_flops"].value_or(0.0);
    } catch (const std::exception&) {
      // an unreadable config: progress without a budget
    }
    const auto point = [&](std::size_t i) {
      return RunPoint{static_cast<std::int64_t>(series->step[i]), static_cast<std::int64_t>(series->tokens[i]),
                      series->flops[i], series->wall[i]};
    };
    ImGui::Text("progress: %s", progress_text(budget, point(0), point(series->step.size() - 1)).c_str());
  }

  // The run's `tfw eval` results: one line per corpus (and parameter blocks), newest last.
  static void evaluations(const RunRecord& r, const StoreSnapshot& snapshot) {
    std::map<std::string, std::map<std::string, double>> lines;  // "corpus [blocks] (step S)" -> metric -> value
    for (const EvaluationRow& e : snapshot.evaluations) {
      if (e.run != r.id || e.mode.rfind("stride", 0) == 0) continue;
      const std::string key =
          fmt::format("{}{} (step {})", e.corpus, e.blocks.empty() ? "" : " [" + e.blocks + "]", e.step);
      lines[key][e.metric] = e.value;
    }
    if (lines.empty()) return;
    ImGui::TextUnformatted("evaluations (tfw eval):");
    help_marker(
        "Loss (nats per token), bits per byte, and the cloze test's accuracy and mean target log-likelihood, "
        "from `tfw eval` (or an experiment's [experiment.eval]); the parameter blocks in brackets.");
    for (const auto& [key, metrics] : lines) {
      std::string text = "  " + key + ":";
      for (const char* metric : {"loss", "bits_per_byte", "cloze_accuracy", "cloze_logprob"}) {
        const auto found = metrics.find(metric);
        if (found != metrics.end()) text += fmt::format("  {} {:.4f}", metric, found->second);
      }
      ImGui::TextUnformatted(text.c_str());
    }
  }

  char filter_[128] = "";
  int status_ = 0;
  bool tree_ = true;
  std::int64_t focus_ = 0;
  std::string message_;
  std::vector<const RunRecord*> shown_;
};

}  // namespace

std::unique_ptr<Panel> make_runs_panel() { return std::make_unique<RunsPanel>(); }

}  // namespace tfw::gui
