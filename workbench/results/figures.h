// The paper's figures from the store, as SVG written directly (vector, for papers) and PNG
// rasterised from that SVG by Debian's rsvg-convert (librsvg2-bin), so both show the same
// drawing. Axis ticks come from the plot arithmetic the GUI uses too (common/plot_math.h), colours from
// its palette (colormap.h): a figure and the GUI's curves look alike. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "analysis/curves.h"
#include "workbench/results/results.h"

namespace tfw::results {

struct FigureSeries {
  std::string label;
  std::size_t colour = 0;  // index into series_rgb
  bool dashed = false;
  std::vector<std::string> run_names;                     // one per line
  std::vector<std::vector<analysis::CurvePoint>> lines;   // one per run
  std::vector<analysis::CurvePoint> band_low, band_high;  // min-max over seeds (empty: none)
  std::vector<analysis::CurvePoint> markers;              // growth points
};

struct Figure {
  std::string id;  // the file stem: "loss_vs_flops"
  std::string title, caption, x_label, y_label;
  bool log_x = true, log_y = false;
  std::vector<FigureSeries> series;
};

// The figures the experiment asks for ([experiment.figures]) from its results.
std::vector<Figure> figures_of(const ExperimentResults& results);

// One colour a lineage, for the figures and the GUI's curves: groups in order, parent[g] the
// group g was grown from (-1: none), width[g] the colours g takes (1: drawn as one line; a group
// drawn seed by seed, one a run). A group drawn as one line that is the only child of a parent
// drawn as one line before it continues the parent's colour, so that a ladder of stages reads as
// one line; a parent grown several ways gives each branch its own. Returns each group's first
// colour index.
std::vector<std::size_t> lineage_colour_indices(const std::vector<long>& parent, const std::vector<std::size_t>& width);

// titled = false: without the title above and the caption below (for a paper, whose own
// caption describes the figure; `tfw export --figures DIR --no-title`).
std::string svg_render(const Figure& figure, bool titled = true);

// Writes DIR/ID.svg and DIR/ID.png for each figure; returns the paths written. Without
// rsvg-convert the PNGs are skipped with a warning on stderr (the SVGs are the figures).
std::vector<std::string> figures_write(const ExperimentResults& results, const std::string& dir, bool titled = true);

}  // namespace tfw::results
