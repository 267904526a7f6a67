// See attention_png.h.
#include "workbench/cli/attention_png.h"

#include <stb_image_write.h>
#include <stb_truetype.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "workbench/colormap.h"

namespace tfw::cli {

namespace {

const char* kFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const Rgb kBackground{22, 24, 28}, kText{215, 215, 215}, kDim{150, 150, 150}, kMark{255, 255, 255};

struct Canvas {
  int width, height;
  std::vector<unsigned char> pixels;
  Canvas(int w, int h) : width(w), height(h), pixels(static_cast<std::size_t>(w) * h * 3) {
    for (std::size_t i = 0; i < pixels.size(); i += 3) {
      pixels[i] = kBackground.r, pixels[i + 1] = kBackground.g, pixels[i + 2] = kBackground.b;
    }
  }
  void blend(int x, int y, Rgb c, double alpha) {
    if (x < 0 || y < 0 || x >= width || y >= height || alpha <= 0) return;
    unsigned char* p = &pixels[(static_cast<std::size_t>(y) * width + x) * 3];
    auto mix = [&](unsigned char& to, std::uint8_t from) {
      to = static_cast<unsigned char>(std::lround(to + (from - to) * std::min(1.0, alpha)));
    };
    mix(p[0], c.r), mix(p[1], c.g), mix(p[2], c.b);
  }
  void fill(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) blend(x, y, c, 1.0);
    }
  }
};

// UTF-8 to code points (invalid bytes become U+FFFD).
std::vector<int> code_points(const std::string& text) {
  std::vector<int> out;
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > text.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    int cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(cp);
    i += static_cast<std::size_t>(n);
  }
  return out;
}

class Font {
 public:
  bool load() {
    std::ifstream in(kFont, std::ios::binary);
    if (!in) return false;
    data_.assign(std::istreambuf_iterator<char>(in), {});
    return stbtt_InitFont(&info_, data_.data(), stbtt_GetFontOffsetForIndex(data_.data(), 0)) != 0;
  }
  int width(const std::string& text, float px) const {
    const float scale = stbtt_ScaleForPixelHeight(&info_, px);
    int advance = 0, lsb = 0;
    float x = 0;
    for (int cp : code_points(text)) {
      stbtt_GetCodepointHMetrics(&info_, cp, &advance, &lsb);
      x += advance * scale;
    }
    return static_cast<int>(std::ceil(x));
  }
  // Draws `text` with its top at `top`; returns the width drawn.
  int draw(Canvas& canvas, const std::string& text, int left, int top, float px, Rgb colour) const {
    const float scale = stbtt_ScaleForPixelHeight(&info_, px);
    int ascent = 0, descent = 0, gap = 0;
    stbtt_GetFontVMetrics(&info_, &ascent, &descent, &gap);
    const int baseline = top + static_cast<int>(std::lround(ascent * scale));
    float x = static_cast<float>(left);
    for (int cp : code_points(text)) {
      int advance = 0, lsb = 0, x0 = 0, y0 = 0, x1 = 0, y1 = 0;
      stbtt_GetCodepointHMetrics(&info_, cp, &advance, &lsb);
      stbtt_GetCodepointBitmapBox(&info_, cp, scale, scale, &x0, &y0, &x1, &y1);
      const int w = x1 - x0, h = y1 - y0;
      if (w > 0 && h > 0) {
        std::vector<unsigned char> glyph(static_cast<std::size_t>(w) * h);
        stbtt_MakeCodepointBitmap(&info_, glyph.data(), w, h, w, scale, scale, cp);
        const int gx = static_cast<int>(std::lround(x)) + x0, gy = baseline + y0;
        for (int j = 0; j < h; ++j) {
          for (int i = 0; i < w; ++i) canvas.blend(gx + i, gy + j, colour, glyph[j * w + i] / 255.0);
        }
      }
      x += advance * scale;
    }
    return static_cast<int>(std::ceil(x)) - left;
  }

 private:
  std::vector<unsigned char> data_;
  stbtt_fontinfo info_{};
};

// About `target` column ticks at 1-2-5 multiples.
int tick_step(std::int64_t columns, int target) {
  const double raw = static_cast<double>(columns) / target;
  const double power = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return static_cast<int>(m * power);
  }
  return static_cast<int>(10 * power);
}

// The colour ramp from `high` (top) to `low` (bottom), 14 px wide at x, with its range.
void colour_bar(Canvas& canvas, const Font& font, int x, int top, int height, double low, double high) {
  for (int y = 0; y < height; ++y) {
    canvas.fill(x, top + y, x + 14, top + y + 1, heat_colour(1.0 - static_cast<double>(y) / std::max(1, height - 1)));
  }
  font.draw(canvas, fmt::format("{:.3g}", high), x + 18, top - 2, 12, kText);
  font.draw(canvas, fmt::format("{:.3g}", low), x + 18, top + height - 14, 12, kText);
}

}  // namespace

HeatmapLayout attention_png_write(const AttentionMap& map, const std::string& title, const std::string& path) {
  const int rows = static_cast<int>(map.tokens.size()), columns = static_cast<int>(map.parameter_tokens);
  HeatmapLayout layout;
  layout.cell_width = std::max(1, std::min(8, 1600 / std::max(columns, 1)));
  layout.cell_height = 14;
  Font font;
  layout.labelled = font.load();
  const float label_px = 12, title_px = 15;
  int label_width = 0;
  if (layout.labelled) {
    for (const std::string& token : map.tokens)
      label_width = std::max(label_width, font.width(token_row_label(token), label_px));
  }
  const int heat_w = columns * layout.cell_width, heat_h = rows * layout.cell_height;
  const int left = layout.labelled ? label_width + 14 : 0, top = layout.labelled ? 58 : 0;
  const int bar = layout.labelled ? 90 : 0, bottom = layout.labelled ? 44 : 0;
  const std::string subtitle = "rows: input tokens \u00b7 columns: parameter tokens" +
                               attention_stages_text(map.marked_stages()) + " \u00b7 colour: \u0398(S)";
  const int title_w = layout.labelled ? std::max(font.width(title, title_px), font.width(subtitle, label_px)) + 16 : 0;
  layout.x = left;
  layout.y = top;
  layout.width = std::max(left + heat_w + bar, title_w);
  layout.height = top + heat_h + bottom;
  Canvas canvas(layout.width, layout.height);

  const auto [low_it, high_it] = std::minmax_element(map.scores.begin(), map.scores.end());
  const double low = map.scores.empty() ? 0 : *low_it, high = map.scores.empty() ? 1 : *high_it;
  const double range = high > low ? high - low : 1.0;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < columns; ++j) {
      const Rgb colour = heat_colour((map.at(i, j) - low) / range);
      canvas.fill(left + j * layout.cell_width, top + i * layout.cell_height, left + (j + 1) * layout.cell_width,
                  top + (i + 1) * layout.cell_height, colour);
    }
  }
  if (layout.labelled) {
    font.draw(canvas, title, 8, 6, title_px, kText);
    font.draw(canvas, subtitle, 8, 26, label_px, kDim);
    for (int i = 0; i < rows; ++i) {
      const std::string label = token_row_label(map.tokens[i]);
      font.draw(canvas, label, left - 8 - font.width(label, label_px), top + i * layout.cell_height + 1, label_px,
                kText);
    }
    // Column ticks, and the axis title.
    const int step = std::max(1, tick_step(columns, std::max(2, heat_w / 80)));
    for (int j = 0; j <= columns; j += step) {
      const int x = left + j * layout.cell_width;
      canvas.fill(x, top + heat_h, x + 1, top + heat_h + 4, kDim);
      const std::string text = std::to_string(j);
      font.draw(canvas, text, std::min(x - font.width(text, label_px) / 2, layout.width - font.width(text, label_px)),
                top + heat_h + 5, label_px, kText);
    }
    const std::string axis = "parameter token";
    font.draw(canvas, axis, left + (heat_w - font.width(axis, label_px)) / 2, top + heat_h + 24, label_px, kDim);
    // Growth: a dashed line after each stage but the last, and each stage's name over its
    // columns where it fits (all of them in the subtitle).
    const std::vector<AttentionStage> stages = map.marked_stages();
    std::int64_t begin = 0;
    for (std::size_t k = 0; k < stages.size(); ++k) {
      const int x0 = left + static_cast<int>(begin) * layout.cell_width;
      const int x1 = left + static_cast<int>(stages[k].tokens) * layout.cell_width;
      if (k + 1 < stages.size()) {
        for (int y = top - 6; y < top + heat_h; ++y) {
          if ((y / 4) % 2 == 0) canvas.blend(x1, y, kMark, 0.9);
        }
      }
      if (stages.size() > 1 && font.width(stages[k].name, label_px) + 8 <= x1 - x0)
        font.draw(canvas, stages[k].name, x0 + 4, top - 18, label_px, kText);
      begin = stages[k].tokens;
    }
    colour_bar(canvas, font, left + heat_w + 14, top, heat_h, low, high);
  }
  if (!stbi_write_png(path.c_str(), layout.width, layout.height, 3, canvas.pixels.data(), layout.width * 3)) {
    throw Error(fmt::format("cannot write {}", path));
  }
  return layout;
}

HeatmapLayout attention_patches_png_write(const AttentionMap& map, std::int64_t parameter_token,
                                          const std::string& title, const std::string& path) {
  const AttentionImage& image = *map.image;
  const int scale = std::max(1, 336 / static_cast<int>(std::max(image.height, image.width)));  // pixels per image pixel
  const int panel_w = static_cast<int>(image.width) * scale, panel_h = static_cast<int>(image.height) * scale;
  Font font;
  HeatmapLayout layout;
  layout.labelled = font.load();
  const float label_px = 12, title_px = 15;
  const int top = layout.labelled ? 64 : 0, gap = 24, bar = layout.labelled ? 80 : 0, bottom = layout.labelled ? 24 : 0;
  layout.x = panel_w + gap;
  layout.y = top;
  layout.cell_width = static_cast<int>(image.patch) * scale;
  layout.cell_height = layout.cell_width;
  const std::string subtitle = fmt::format(
      "validation image {} \u00b7 label {} \u00b7 predicted {} \u00b7 right: \u0398(S) of parameter token {} "
      "over the patches",
      image.index, image.label, image.predicted, parameter_token);
  layout.width =
      std::max(2 * panel_w + gap + bar,
               layout.labelled ? std::max(font.width(title, title_px), font.width(subtitle, label_px)) + 16 : 0);
  layout.height = top + panel_h + bottom;
  Canvas canvas(layout.width, layout.height);
  // The patch tokens' scores for the token (the class token's, if any, is said in the caption).
  std::vector<double> scores;
  for (std::int64_t p = 0; p < image.rows * image.cols; ++p) {
    scores.push_back(map.at(static_cast<std::size_t>(image.leading + p), parameter_token));
  }
  const auto [low_it, high_it] = std::minmax_element(scores.begin(), scores.end());
  const double low = *low_it, high = *high_it, range = high > low ? high - low : 1.0;
  auto grey = [&](std::int64_t y, std::int64_t x) {
    double sum = 0;
    for (std::int64_t c = 0; c < image.channels; ++c)
      sum += image.pixels[static_cast<std::size_t>((y * image.width + x) * image.channels + c)];
    const auto v = static_cast<std::uint8_t>(std::lround(255 * sum / static_cast<double>(image.channels)));
    return Rgb{v, v, v};
  };
  for (std::int64_t y = 0; y < image.height; ++y) {
    for (std::int64_t x = 0; x < image.width; ++x) {
      const Rgb g = grey(y, x);
      const int px = static_cast<int>(x) * scale, py = top + static_cast<int>(y) * scale;
      canvas.fill(px, py, px + scale, py + scale, g);
      // Right: the image dimmed, under the patch's score colour.
      const std::int64_t patch = (y / image.patch) * image.cols + x / image.patch;
      canvas.fill(layout.x + px, py, layout.x + px + scale, py + scale,
                  Rgb{static_cast<std::uint8_t>(g.r / 3), static_cast<std::uint8_t>(g.g / 3),
                      static_cast<std::uint8_t>(g.b / 3)});
      for (int j = 0; j < scale; ++j) {
        for (int i = 0; i < scale; ++i) {
          canvas.blend(layout.x + px + i, py + j, heat_colour((scores[static_cast<std::size_t>(patch)] - low) / range),
                       0.7);
        }
      }
    }
  }
  // The patch grid on both panels.
  const Rgb line{90, 160, 255};
  for (int panel : {0, layout.x}) {
    for (std::int64_t r = 0; r <= image.rows; ++r) {
      const int y = top + std::min(panel_h - 1, static_cast<int>(r) * layout.cell_height);
      for (int x = 0; x < panel_w; ++x) canvas.blend(panel + x, y, line, 0.8);
    }
    for (std::int64_t c = 0; c <= image.cols; ++c) {
      const int x = panel + std::min(panel_w - 1, static_cast<int>(c) * layout.cell_width);
      for (int y = top; y < top + panel_h; ++y) canvas.blend(x, y, line, 0.8);
    }
  }
  if (layout.labelled) {
    font.draw(canvas, title, 8, 6, title_px, kText);
    font.draw(canvas, subtitle, 8, 28, label_px, kDim);
    if (image.leading > 0) {
      font.draw(canvas, fmt::format("class token: {:.3g}", map.at(0, parameter_token)), layout.x, top + panel_h + 6,
                label_px, kDim);
    }
    colour_bar(canvas, font, layout.x + panel_w + 14, top, panel_h, low, high);
  }
  if (!stbi_write_png(path.c_str(), layout.width, layout.height, 3, canvas.pixels.data(), layout.width * 3)) {
    throw Error(fmt::format("cannot write {}", path));
  }
  return layout;
}

}  // namespace tfw::cli
