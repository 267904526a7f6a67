// What the panels share: the options, TFW_HOME, the plugin registry, the store watcher's
// latest snapshot and the run selection. Each panel is one file (panel_*.cpp) implementing
// Panel; app.cpp owns the window, the frame loop and the screenshots.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "workbench/common/format.h"
#include "workbench/gui/gui.h"
#include "workbench/gui/service_link.h"
#include "workbench/gui/store_watcher.h"

namespace tfw {
class Registry;
}

namespace tfw::gui {

struct App {
  GuiOptions options;
  std::string home;
  Registry* registry = nullptr;
  std::unique_ptr<StoreWatcher> watcher;
  std::unique_ptr<ServiceLink> service;           // launches and cancels; null in screenshots
  std::shared_ptr<const StoreSnapshot> snapshot;  // this frame's
  std::set<std::int64_t> selected;                // runs chosen in the runs browser
  bool headless = false;                          // rendering a screenshot: do work synchronously
  std::string request_view;                       // a panel asks to switch tabs ("" none)

  const RunRecord* run(std::int64_t id) const;
  // Config files under ./experiments and the source tree's experiments/ (for pickers).
  const std::vector<std::string>& config_files();
  std::vector<std::string> config_files_cache;
};

class Panel {
 public:
  virtual ~Panel() = default;
  virtual const char* name() const = 0;   // the --view name and the tab label
  virtual const char* title() const = 0;  // the tab label
  virtual void draw(App& app) = 0;
  // Before a screenshot: finish any background work the view needs (synchronously).
  virtual void prepare(App& app) {}
};

// A panel set up from the app (its options, configs and runs) once, before its first draw()
// or prepare(), not at construction: the options are only known once the app runs.
class LazyPanel : public Panel {
 public:
  void draw(App& app) final {
    initialise_once(app);
    draw_view(app);
  }
  void prepare(App& app) override { initialise_once(app); }

 protected:
  virtual void initialise(App& app) = 0;
  virtual void draw_view(App& app) = 0;  // draw(), on a set-up panel
  void initialise_once(App& app) {
    if (initialised_) return;
    initialised_ = true;
    initialise(app);
  }

 private:
  bool initialised_ = false;
};

std::unique_ptr<Panel> make_runs_panel();
std::unique_ptr<Panel> make_curves_panel();
std::unique_ptr<Panel> make_flops_panel();
std::unique_ptr<Panel> make_attention_panel();
std::unique_ptr<Panel> make_designer_panel();

// Small shared widgets.
void help_marker(const char* text);
// Text wrapped at spaces only, to the region's width: ImGui's own wrapping also breaks after a
// '.', which cut "(4.2M" and "1.003e+13" in two. Lines of `text` stay lines.
void text_wrapped_at_spaces(const std::string& text);
// A centred, wrapped message for empty states.
void empty_state(const char* title, const std::string& detail);

}  // namespace tfw::gui
