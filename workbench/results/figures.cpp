// See figures.h.
#include "workbench/results/figures.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/core/files.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/core/process.h"
#include "workbench/colormap.h"
#include "workbench/common/format.h"
#include "workbench/common/plot_math.h"

namespace tfw::results {

namespace {

namespace fs = std::filesystem;

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

constexpr std::size_t kPaletteSize = kSeriesColours;  // series_rgb's colours, then again

std::string hex(std::size_t k) {
  const Rgb c = series_rgb(k);
  return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
}

// Words wrapped to lines of at most `width` characters.
std::vector<std::string> wrap(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string word, line;
  while (in >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

// Min and max over seeds at the x of the first run's evaluations (each other run read there
// when its curve covers it): the band drawn behind a variant's lines.
void band_of(FigureSeries& s) {
  if (s.lines.size() < 2) return;
  for (const analysis::CurvePoint& p : analysis::curve_clean(s.lines.front())) {
    double low = p.y, high = p.y;
    for (std::size_t k = 1; k < s.lines.size(); ++k) {
      try {
        const double y = analysis::value_at(s.lines[k], p.x);
        low = std::min(low, y);
        high = std::max(high, y);
      } catch (const UsageError&) {
        // outside that run's curve: the band there is the others'
      }
    }
    s.band_low.push_back({p.x, low});
    s.band_high.push_back({p.x, high});
  }
}

std::string seeds_text(const ExperimentResults& results) {
  std::set<std::int64_t> seeds;
  std::size_t most = 0;
  for (const Variant& v : results.variants()) {
    most = std::max(most, v.finished().size());
    for (const RunResult* r : v.finished()) {
      if (r->seed >= 0) seeds.insert(r->seed);
    }
  }
  if (seeds.empty()) return "one run per line, no seeds";
  std::string list;
  for (std::int64_t s : seeds) list += (list.empty() ? "" : ", ") + std::to_string(s);
  return fmt::format("seeds {} (up to {} per line group)", list, most);
}

std::string scale_text(const ExperimentResults& results) {
  std::int64_t low = std::numeric_limits<std::int64_t>::max(), high = 0, tokens = 0;
  for (const RunResult& r : results.runs()) {
    if (!r.finished()) continue;
    low = std::min(low, r.record->parameters);
    high = std::max(high, r.record->parameters);
    tokens = std::max(tokens, r.record->tokens);
  }
  if (high == 0) return "no finished runs";
  std::string names;
  for (const std::string& c : results.corpora()) names += (names.empty() ? "" : ", ") + c;
  const std::string sizes = low == high ? short_count(low) : short_count(low) + "-" + short_count(high);
  return fmt::format("{} parameters, up to {} tokens per run, data {}", sizes, short_count(tokens), names);
}

std::string caption_of(const ExperimentResults& results, const std::string& what, const std::string& mirrors) {
  const Experiment& e = results.experiment();
  std::string text = fmt::format("{}{}. {}. Scale: {}; {}.", e.name, e.description.empty() ? "" : ": " + e.description,
                                 what, scale_text(results), seeds_text(results));
  if (!mirrors.empty())
    text += fmt::format(" Mirrors the paper's {} at CPU scale: compare trends, not values.", mirrors);
  return text;
}

// The unit of the validation loss: per token for language models, per image for image
// classifiers (whose runs record val/accuracy).
std::string loss_label(const ExperimentResults& results) {
  for (const RunResult& run : results.runs()) {
    if (run.finished() && std::isfinite(results.final_value(run, "val/accuracy")))
      return "validation loss (nats/image)";
  }
  return "validation loss (nats/token)";
}

// A figure's file stem, its title (after the experiment's name) and its axes.
Figure figure_of(const ExperimentResults& results, std::string id, const std::string& title, std::string x_label,
                 std::string y_label) {
  Figure f;
  f.id = std::move(id);
  f.title = results.experiment().name + ": " + title;
  f.x_label = std::move(x_label);
  f.y_label = std::move(y_label);
  return f;
}

// One colour per lineage: a grown group that is its parent group's only grown child takes the
// parent's colour, so that a ladder of stages reads as one line; a parent grown several ways (a
// comparison of growth methods) gives each branch a colour of its own. Groups in order.
std::vector<std::size_t> lineage_colours(const ExperimentResults& results) {
  const std::vector<Variant>& variants = results.variants();
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < variants.size(); ++i) index[variants[i].name] = i;
  std::map<std::int64_t, std::string> variant_of_id;  // store id -> group
  for (const RunResult& run : results.runs()) {
    if (run.record) variant_of_id[run.record->id] = run.variant;
  }
  // Each group's parent group (none: -1), from its first run that has a parent.
  std::vector<long> parent(variants.size(), -1);
  for (std::size_t i = 0; i < variants.size(); ++i) {
    for (const RunResult* run : variants[i].runs) {
      std::string name;
      if (run->planned != nullptr && !run->planned->parent.empty()) {
        if (const RunResult* p = results.run(run->planned->parent)) name = p->variant;
      } else if (run->record && run->record->parent != 0 && variant_of_id.count(run->record->parent)) {
        name = variant_of_id[run->record->parent];
      }
      if (name.empty() || !index.count(name)) continue;
      parent[i] = static_cast<long>(index[name]);
      break;
    }
  }
  return lineage_colour_indices(parent, std::vector<std::size_t>(variants.size(), 1));
}

Figure loss_vs_flops(const ExperimentResults& results, const std::string& mirrors) {
  Figure f = figure_of(results, "loss_vs_flops", "validation loss against cumulative training compute",
                       "cumulative training FLOPs (log scale)", loss_label(results));
  const std::vector<std::size_t> colours = lineage_colours(results);
  std::size_t index = 0;
  bool grown = false, single = false;
  for (const Variant& v : results.variants()) {
    FigureSeries s;
    s.colour = colours[index++];
    s.dashed = s.colour >= kPaletteSize;  // the palette's second round: told apart by dashes
    s.label = fmt::format("{} (n = {})", v.name, v.finished().size());
    for (const RunResult* run : v.finished()) {
      // The run's own points on the lineage's axis: a grown run starts where its parent's
      // line ends, at the growth point.
      std::vector<analysis::CurvePoint> line;
      for (const MetricPoint& p : results.points(*run, "val/loss")) {
        line.push_back({std::max(0.0, run->record->inherited_flops) + p.flops, p.value});
      }
      line = analysis::curve_clean(line);
      if (line.empty()) continue;
      if (run->record->parent != 0) {
        s.markers.push_back(line.front());
        grown = true;
      }
      single = single || line.size() == 1;
      s.run_names.push_back(run->name);
      s.lines.push_back(std::move(line));
    }
    if (s.lines.empty()) continue;
    band_of(s);
    f.series.push_back(std::move(s));
  }
  f.caption =
      caption_of(results,
                 std::string("Validation loss of every run (one line per run) against the cumulative FLOPs of "
                             "its lineage; the band spans the seeds' minimum to maximum") +
                     (grown ? "; circles mark growth points (a grown run's first evaluation), and a stage "
                              "that is its parent's only growth keeps its parent's colour: one colour a lineage"
                            : "") +
                     (single ? "; a dot is a run with a single evaluation" : "") +
                     (results.corpora().size() > 1 ? ". Each run's loss is on its own training corpus, so a jump at "
                                                     "a growth point can be the change of data"
                                                   : ""),
                 mirrors);
  return f;
}

Figure new_data(const ExperimentResults& results, const std::string& mirrors) {
  Figure f = figure_of(results, "new_data", "continued training on the new corpus, and what is kept of the old one",
                       "tokens trained after growth (log scale)", loss_label(results));
  std::size_t colour = 0;
  for (const Variant& v : results.variants()) {
    std::vector<const RunResult*> grown;
    for (const RunResult* run : v.finished()) {
      if (run->record->parent != 0) grown.push_back(run);
    }
    if (grown.empty()) continue;
    const toml::table config = toml::parse(grown.front()->record->config);
    const std::string corpus = config["data"]["corpus"].value_or(std::string("?"));
    std::vector<std::pair<std::string, std::string>> keys = {{"val/loss", corpus}};
    if (const toml::array* extra = config["data"]["eval_corpora"].as_array()) {
      for (const toml::node& c : *extra)
        keys.emplace_back("val/loss@" + c.value_or(std::string()), c.value_or(std::string()));
    }
    const std::size_t c = colour++;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      FigureSeries s;
      s.colour = c;
      s.dashed = k > 0;
      s.label = fmt::format("{} on {}{} (n = {})", v.name, keys[k].second, k == 0 ? " (new)" : " (old)", grown.size());
      for (const RunResult* run : grown) {
        std::vector<analysis::CurvePoint> line;
        // Tokens since growth, shifted by one evaluation's worth so the step-0 point shows on a log axis.
        for (const MetricPoint& p : results.points(*run, keys[k].first))
          line.push_back({static_cast<double>(p.tokens), p.value});
        if (line.size() >= 2 && line.front().x == 0) line.front().x = line[1].x / 4;
        line = analysis::curve_clean(line);
        if (line.empty()) continue;
        s.run_names.push_back(run->name + (k == 0 ? "" : "@" + keys[k].second));
        s.lines.push_back(std::move(line));
      }
      if (s.lines.empty()) continue;
      band_of(s);
      f.series.push_back(std::move(s));
    }
  }
  f.caption =
      caption_of(results,
                 "Grown runs only. Solid: validation loss on the corpus training continues on; dashed: on the "
                 "corpus the parent was trained on (its rise is forgetting). The evaluation at growth (0 tokens) "
                 "is drawn at a quarter of the first evaluation's tokens, for the log axis",
                 mirrors);
  return f;
}

// Growth diagnostics (engine/nn/token_use.h): how much grown runs use their appended parameter
// tokens, from the evaluations after their growth.
Figure token_use(const ExperimentResults& results, const std::string& mirrors) {
  Figure f = figure_of(results, "token_use", "use of the parameter tokens growth appended", "tokens trained (this run)",
                       "share (0 to 1)");
  f.log_x = false;
  const std::vector<std::size_t> colours = lineage_colours(results);  // as loss_vs_flops colours them
  for (std::size_t index = 0; index < results.variants().size(); ++index) {
    const Variant& v = results.variants()[index];
    const std::size_t c = colours[index];
    const std::pair<const char*, const char*> kinds[] = {{"token_use/appended_mass", "score mass on appended tokens"},
                                                         {"token_use/appended_active", "appended tokens active"}};
    for (std::size_t k = 0; k < 2; ++k) {
      FigureSeries s;
      s.colour = c;
      s.dashed = k > 0;
      for (const RunResult* run : v.finished()) {
        std::vector<analysis::CurvePoint> line;
        for (const MetricPoint& p : results.points(*run, kinds[k].first))
          line.push_back({static_cast<double>(p.tokens), p.value});
        line = analysis::curve_clean(line);
        if (line.empty()) continue;
        s.run_names.push_back(run->name + (k == 0 ? "" : " (active)"));
        s.lines.push_back(std::move(line));
      }
      if (s.lines.empty()) continue;
      s.label = fmt::format("{}: {} (n = {})", v.name, kinds[k].second, s.lines.size());
      band_of(s);
      f.series.push_back(std::move(s));
    }
  }
  f.caption = caption_of(results,
                         "Runs with grown Pattention layers only, at each evaluation after the growth, averaged over "
                         "layers and projections. Solid: the share of the score mass |Θ(S)| on the appended tokens "
                         "(m/n if they were used like the old ones, 0 if never). Dashed: the share of appended tokens "
                         "some input activates above 0.1 times the old tokens' mean activation",
                         mirrors);
  return f;
}

Figure flops_vs_length(const ExperimentResults& results, const std::string& mirrors) {
  Figure f = figure_of(results, "flops_vs_length", "forward FLOPs per token against sequence length",
                       "sequence length T (tokens, log scale)", "forward FLOPs per token (log scale)");
  f.log_y = true;
  std::size_t colour = 0;
  std::map<std::string, std::size_t> drawn;  // model table -> its series
  std::vector<std::string> models;           // "name 4.3M" for the caption
  for (const Variant& v : results.variants()) {
    std::string config_text;
    for (const RunResult* run : v.runs) {
      if (run->planned)
        config_text = run->planned->config_toml;
      else if (run->record)
        config_text = run->record->config;
      if (!config_text.empty()) break;
    }
    if (config_text.empty()) continue;
    ModelConfig model;
    try {
      model = model_config_parse(registry(), toml::parse(config_text), v.name);
    } catch (const std::exception&) {
      continue;  // a family this build does not have
    }
    // Variants of the same model (a grown stage and its size from scratch) share one line.
    std::ostringstream model_text;
    model_text << model.family << "\n" << model.spec->to_toml();
    if (auto same = drawn.find(model_text.str()); same != drawn.end()) {
      f.series[same->second].label += " = " + v.name;
      continue;
    }
    drawn.emplace(model_text.str(), f.series.size());
    FigureSeries s;
    s.colour = colour++;
    s.dashed = s.colour >= kPaletteSize;
    s.label = v.name;
    std::vector<analysis::CurvePoint> line;
    for (double t = 64; t <= 65536; t *= 2) {
      const auto flops = model.spec->flops_per_token(static_cast<std::int64_t>(t));
      line.push_back({t, static_cast<double>(flops.forward())});
    }
    // A line that coincides with an earlier one (matched models) hides it: say so.
    for (const FigureSeries& earlier : f.series) {
      bool same = earlier.lines.front().size() == line.size();
      for (std::size_t i = 0; same && i < line.size(); ++i) {
        same = std::fabs(earlier.lines.front()[i].y / line[i].y - 1) < 0.01;
      }
      if (same) s.label += " (on top of " + earlier.label + ", within 1%)";
    }
    models.push_back(fmt::format("{} {}", v.name, short_count(static_cast<double>(model.spec->parameter_count()))));
    s.run_names.push_back(v.name);
    s.lines.push_back(std::move(line));
    f.series.push_back(std::move(s));
  }
  const Experiment& e = results.experiment();
  std::string list;
  for (const std::string& m : models) list += (list.empty() ? "" : ", ") + m;
  f.caption = fmt::format(
      "{}{}. Forward FLOPs per token from the paper's Table 3 (Wang et al., 2024), T = 64 to 65,536; "
      "one line per model configuration. Models (parameters): {}.{}",
      e.name, e.description.empty() ? "" : ": " + e.description, list,
      mirrors.empty() ? "" : fmt::format(" Mirrors the paper's {} at CPU scale.", mirrors));
  return f;
}

// The drawable range of the lines, padded (log axes pad in log units).
AxisMap fit_axis(const Figure& f, bool x_axis) {
  std::vector<double> values;
  for (const FigureSeries& s : f.series) {
    for (const auto& line : s.lines) {
      for (const analysis::CurvePoint& p : line) values.push_back(x_axis ? p.x : p.y);
    }
    for (const auto* band : {&s.band_low, &s.band_high}) {
      for (const analysis::CurvePoint& p : *band) values.push_back(x_axis ? p.x : p.y);
    }
  }
  AxisMap axis;
  const bool log = x_axis ? f.log_x : f.log_y;
  if (!axis_fit({&values}, log, x_axis ? 0.02 : 0.05, axis)) axis = AxisMap{0, 1, log};
  return axis;
}

}  // namespace

std::vector<std::size_t> lineage_colour_indices(const std::vector<long>& parent,
                                                const std::vector<std::size_t>& width) {
  std::vector<std::size_t> children(parent.size(), 0);
  for (const long p : parent) {
    if (p >= 0) children[static_cast<std::size_t>(p)] += 1;
  }
  std::vector<std::size_t> colour(parent.size(), 0);
  std::size_t next = 0;
  for (std::size_t g = 0; g < parent.size(); ++g) {
    const long p = parent[g];
    const bool continues = width[g] == 1 && p >= 0 && static_cast<std::size_t>(p) < g &&
                           width[static_cast<std::size_t>(p)] == 1 && children[static_cast<std::size_t>(p)] == 1;
    if (continues) {
      colour[g] = colour[static_cast<std::size_t>(p)];
      continue;
    }
    colour[g] = next;
    next += width[g];
  }
  return colour;
}

std::vector<Figure> figures_of(const ExperimentResults& results) {
  std::vector<Figure> figures;
  for (const auto& [kind, mirrors] : results.experiment().figures) {
    if (kind == "loss_vs_flops") figures.push_back(loss_vs_flops(results, mirrors));
    if (kind == "new_data") figures.push_back(new_data(results, mirrors));
    if (kind == "flops_vs_length") figures.push_back(flops_vs_length(results, mirrors));
    if (kind == "token_use") figures.push_back(token_use(results, mirrors));
  }
  return figures;
}

std::string svg_render(const Figure& f, bool titled) {
  // Untitled (for a paper, whose own caption says it): no title above, no caption below.
  const double left = 86, top = titled ? 52 : 16, width = 560, height = 360, legend_x = left + width + 24;
  const std::vector<std::string> caption = titled ? wrap(f.caption, 118) : std::vector<std::string>{};
  const double total_width = 900, total_height = top + height + 74 + 17.0 * static_cast<double>(caption.size()) + 12;
  const AxisMap ax = fit_axis(f, true), ay = fit_axis(f, false);
  auto sx = [&](double x) { return left + width * ax.unit(x); };
  auto sy = [&](double y) { return top + height * (1 - ay.unit(y)); };
  std::ostringstream out;
  out << fmt::format(R"svg(<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1:.0f}" viewBox="0 0 {0} {1:.0f}" font-family="DejaVu Sans, sans-serif">
<rect x="0" y="0" width="{0}" height="{1:.0f}" fill="white"/>
{2})svg",
                     total_width, total_height,
                     titled ? fmt::format("<text x=\"{}\" y=\"28\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
                                          left, xml_escape(f.title))
                            : std::string());
  // Grid and ticks.
  out << "<g font-size=\"12\" fill=\"#333333\">\n";
  for (const Tick& t : axis_ticks(ax, 7)) {
    const double x = sx(t.value);
    if (x < left - 0.5 || x > left + width + 0.5) continue;
    out << fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#e3e3e3\"/>\n", x, top,
                       top + height);
    if (t.major || ax.hi - ax.lo < 3) {
      out << fmt::format("<text x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, top + height + 18,
                         xml_escape(t.label));
    }
  }
  for (const Tick& t : axis_ticks(ay, 7)) {
    const double y = sy(t.value);
    if (y < top - 0.5 || y > top + height + 0.5) continue;
    out << fmt::format("<line x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"#e3e3e3\"/>\n", left, y,
                       left + width);
    out << fmt::format("<text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\">{}</text>\n", left - 8, y + 4,
                       xml_escape(t.label));
  }
  out << "</g>\n";
  out << fmt::format(R"svg(<text x="{:.1f}" y="{}" font-size="13" text-anchor="middle">{}</text>
<text x="22" y="{:.1f}" font-size="13" text-anchor="middle" transform="rotate(-90 22 {:.1f})">{}</text>
)svg",
                     left + width / 2, top + height + 42, xml_escape(f.x_label), top + height / 2, top + height / 2,
                     xml_escape(f.y_label));
  // Data, clipped to the plot area.
  out << fmt::format(R"svg(<clipPath id="plot"><rect x="{}" y="{}" width="{}" height="{}"/></clipPath>
<g clip-path="url(#plot)">
)svg",
                     left, top, width, height);
  for (const FigureSeries& s : f.series) {
    if (s.band_low.size() >= 2) {
      out << "<polygon class=\"band\" fill=\"" << hex(s.colour) << "\" fill-opacity=\"0.16\" stroke=\"none\" points=\"";
      for (const auto& p : s.band_high) out << fmt::format("{:.2f},{:.2f} ", sx(p.x), sy(p.y));
      for (auto it = s.band_low.rbegin(); it != s.band_low.rend(); ++it)
        out << fmt::format("{:.2f},{:.2f} ", sx(it->x), sy(it->y));
      out << "\"/>\n";
    }
  }
  for (const FigureSeries& s : f.series) {
    for (std::size_t k = 0; k < s.lines.size(); ++k) {
      out << "<path class=\"run\" data-run=\"" << xml_escape(s.run_names[k]) << "\" fill=\"none\" stroke=\""
          << hex(s.colour) << "\" stroke-width=\"1.6\"" << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " d=\"";
      bool first = true;
      for (const analysis::CurvePoint& p : s.lines[k]) {
        const double x = sx(p.x), y = sy(p.y);
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        out << fmt::format("{}{:.2f} {:.2f} ", first ? "M" : "L", x, y);
        first = false;
      }
      out << "\"/>\n";
      // A run evaluated once has no line to draw: a dot in its colour shows it (the legend
      // names it, so it must be on the plot).
      if (s.lines[k].size() == 1) {
        const double x = sx(s.lines[k].front().x), y = sy(s.lines[k].front().y);
        if (std::isfinite(x) && std::isfinite(y)) {
          out << fmt::format(
              "<circle class=\"point\" data-run=\"{}\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\"/>\n",
              xml_escape(s.run_names[k]), x, y, hex(s.colour));
        }
      }
    }
    for (const analysis::CurvePoint& m : s.markers) {
      out << fmt::format(
          "<circle class=\"growth\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"4\" fill=\"white\" stroke=\"{}\" "
          "stroke-width=\"1.6\"/>\n",
          sx(m.x), sy(m.y), hex(s.colour));
    }
  }
  out << "</g>\n";
  out << fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333333\"/>\n", left,
                     top, width, height);
  // Legend, beside the plot: it never covers data.
  out << "<g font-size=\"12\">\n";
  double y = top + 8;
  bool any_band = false, any_marker = false;
  for (const FigureSeries& s : f.series) {
    out << fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>\n",
                       legend_x, y, legend_x + 26, y, hex(s.colour), s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    for (const std::string& line : wrap(s.label, 26)) {
      out << fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", legend_x + 34, y + 4, xml_escape(line));
      y += 15;
    }
    y += 5;
    any_band = any_band || !s.band_low.empty();
    any_marker = any_marker || !s.markers.empty();
  }
  if (any_marker) {
    out << fmt::format(
        "<circle cx=\"{}\" cy=\"{:.1f}\" r=\"4\" fill=\"white\" stroke=\"#333333\" stroke-width=\"1.6\"/>\n",
        legend_x + 13, y);
    out << fmt::format("<text x=\"{}\" y=\"{:.1f}\">growth point</text>\n", legend_x + 34, y + 4);
    y += 20;
  }
  if (any_band) {
    out << fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"26\" height=\"10\" fill=\"#333333\" fill-opacity=\"0.16\"/>\n", legend_x,
        y - 5);
    out << fmt::format("<text x=\"{}\" y=\"{:.1f}\">min-max over seeds</text>\n", legend_x + 34, y + 4);
  }
  out << "</g>\n";
  double cy = top + height + 72;
  for (const std::string& line : caption) {
    out << fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\" fill=\"#222222\">{}</text>\n", 20, cy,
                       xml_escape(line));
    cy += 17;
  }
  out << "</svg>\n";
  return out.str();
}

std::vector<std::string> figures_write(const ExperimentResults& results, const std::string& dir, bool titled) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw UsageError(with_hint(fmt::format("cannot create the figures folder {}: {}", dir, ec.message()),
                               "choose a writable folder"));
  std::vector<std::string> written;
  bool warned = false;
  for (const Figure& f : figures_of(results)) {
    const std::string svg = (fs::path(dir) / (f.id + ".svg")).string();
    const std::string png = (fs::path(dir) / (f.id + ".png")).string();
    const std::string text = svg_render(f, titled);
    file_write_durably(svg, text.data(), text.size());
    written.push_back(svg);
    // PNG: Debian's rsvg-convert rasterises the same SVG (twice the size, for screens).
    const std::string rsvg = program_path("rsvg-convert");
    if (rsvg.empty()) {
      if (!warned)
        std::cerr << "warning: rsvg-convert not found, so no PNGs (install librsvg2-bin); the SVGs are written\n";
      warned = true;
      continue;
    }
    ProcessSpec spec;
    spec.argv = {rsvg, "--zoom", "2", "--background-color", "white", "-o", png, svg};
    spec.own_group = false;
    if (Process::spawn(spec).wait() != 0) {
      throw Error(fmt::format("rsvg-convert failed to rasterise {} into {}", svg, png));
    }
    written.push_back(png);
  }
  return written;
}

}  // namespace tfw::results
