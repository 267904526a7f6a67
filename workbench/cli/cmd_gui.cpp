// `tfw gui`: the desktop workbench (workbench/gui), or with --screenshot one view rendered
// headless to a PNG (for tests and docs; under Xvfb where there is no display).
#include <fmt/format.h>

#include "engine/core/error.h"
#include "workbench/cli/commands.h"
#include "workbench/gui/gui.h"

namespace tfw::cli {

void add_gui_command(CLI::App& app) {
  auto options = std::make_shared<gui::GuiOptions>();
  CLI::App* command = app.add_subcommand("gui",
                                         "The workbench GUI: runs, loss curves, FLOPs against length, "
                                         "parameter-attention maps, schedule designer");
  add_home_option(command, options->home);
  command->add_option("--connect", options->connect,
                      "HOST:PORT of an engine service: show its runs (read over the socket; its TFW_HOME need "
                      "not be readable here) and launch and cancel through it (default: the runs of TFW_HOME, "
                      "launched through the service serving it, else an embedded one on loopback)");
  command->add_option("--token-file", options->token_file, "the service's token file");
  command->add_option("--screenshot", options->screenshot, "render --view once to this PNG and exit");
  command->add_option("--view", options->view, "the view to open: runs, curves, flops, attention, designer")
      ->check(CLI::IsMember({"runs", "curves", "flops", "attention", "designer"}));
  command
      ->add_option("--select", options->select,
                   "runs to select, comma-separated ids or names "
                   "(screenshots default to the newest 10)")
      ->delimiter(',');
  command->add_option("--size", options->width, "window width (height follows at 5:8 unless --height)")
      ->check(CLI::Range(320, 8192));
  command->add_option("--height", options->height, "window height")->check(CLI::Range(240, 8192));
  command->add_option("--metric", options->metric, "curves: the metric (train/loss, val/loss, ...)");
  command->add_option("--x", options->x_axis, "curves: x axis")
      ->check(CLI::IsMember({"steps", "tokens", "cumulative_tokens", "flops", "cumulative_flops", "wall"}));
  command->add_flag("--log-x", options->log_x, "curves: log x axis");
  command->add_flag("--each-seed", options->each_seed,
                    "curves: draw every run of a seed group alone (default: their mean and min-max band)");
  command->add_flag("--log-y", options->log_y, "curves: log y axis");
  command->add_option("--smoothing", options->smoothing, "curves: EMA weight in [0, 1)")->check(CLI::Range(0.0, 0.99));
  command->add_option("--checkpoint", options->checkpoint, "attention: a checkpoint (.safetensors)");
  command->add_option("--text", options->text, "attention: the input text");
  command->add_option("--layer", options->layer, "attention: layer")->check(CLI::NonNegativeNumber);
  command->add_option("--proj", options->projection, "attention: q, k, v, o or ffn")
      ->check(CLI::IsMember({"q", "k", "v", "o", "ffn"}));
  command->add_option("--token", options->parameter_token,
                      "attention: list this parameter token's top contexts (an image classifier: map it over the "
                      "patches)");
  command->add_option("--image", options->image, "attention, image classifiers: the validation image to map")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--bench-frames", options->bench_frames,
                   "render N frames headless (mouse sweeping) and print frame times; see bench/")
      ->check(CLI::PositiveNumber);
  command->add_flag("--bench-zoom", options->bench_zoom, "with --bench-frames: zoom in and out on every frame");
  command->add_option("--config", options->configs, "flops, designer: run config files (repeatable)");
  command->callback([options, command] {
#ifdef TFW_HAVE_GUI
    if (command->count("--size") && !command->count("--height")) options->height = options->width * 5 / 8;
    if (const int status = gui::gui_run(*options); status != 0) throw Error("the screenshot could not be written");
#else
    throw UsageError(with_hint("this tfw was built without the GUI",
                               "configure with -DTFW_GUI=ON (needs "
                               "libimgui-dev and libglfw3-dev)"));
#endif
  });
}

}  // namespace tfw::cli
