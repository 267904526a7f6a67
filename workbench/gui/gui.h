// The workbench GUI's entry point, for `tfw gui`. Free of ImGui and torch: the CLI includes
// it; everything behind it lives in workbench/gui (docs/design/ARCHITECTURE.md, "The GUI").
#pragma once

#include <string>
#include <vector>

namespace tfw::gui {

struct GuiOptions {
  std::string home;     // TFW_HOME
  std::string connect;  // an engine service: show its runs and launch through it
                        // (default: this home's runs, launched through its service, else embedded)
  std::string token_file;
  std::string screenshot;           // render `view` once to this PNG and exit
  std::string view = "runs";        // runs curves flops attention designer
  std::vector<std::string> select;  // runs to select (ids or names); screenshots default to the newest 10
  int width = 1440, height = 900;
  // View settings (the same as the controls; useful for screenshots).
  std::string metric = "train/loss";
  std::string x_axis = "tokens";  // steps tokens cumulative_tokens flops cumulative_flops wall
  bool log_x = false, log_y = false;
  double smoothing = 0;
  bool each_seed = false;  // curves: every run of a seed group alone, not their mean and band
  std::string checkpoint;  // attention: a checkpoint path (default: the first selected run's newest)
  std::string text;        // attention: the input text
  int layer = 0;
  std::string projection = "q";
  int parameter_token = -1;          // attention: list this token's top contexts (an image: map it over the patches)
  int image = 0;                     // attention, image classifiers: the validation image
  std::vector<std::string> configs;  // flops / designer: run config files
  int bench_frames = 0;              // > 0: render this many frames headless, the mouse sweeping
                                     // across the window, and print the frame times (bench/)
  bool bench_zoom = false;           // ... zooming in and out on every frame (no cached downsampling)
};

// Whether this build has the GUI (TFW_GUI).
bool gui_available();

// Opens the window (or, with `screenshot`, renders one view headless and writes the PNG).
// Returns the exit code. Throws UsageError for bad options or no X display.
int gui_run(const GuiOptions& options);

}  // namespace tfw::gui
