// The heat-map colour scale shared by `tfw attention` (PNG) and the GUI's attention panel:
// a perceptually ordered dark-blue -> teal -> green -> yellow ramp (in the spirit of
// viridis), linear between five anchors. Header-only, no dependencies.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tfw {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
};

// The qualitative palette that plots cycle through (the GUI's curves on a dark ground, the
// exported figures on a white one): Paul Tol's "bright" scheme, distinct to colour-blind eyes
// and readable on both grounds, in his order, in which neighbours differ in hue and lightness:
// blue, red, green, yellow, cyan, purple, grey (personal.sron.nl/~pault, "Colour schemes").
inline constexpr std::size_t kSeriesColours = 7;

// The k-th colour of the palette (k modulo its size).
inline Rgb series_rgb(std::size_t k) {
  static constexpr std::array<Rgb, kSeriesColours> palette = {{{68, 119, 170},
                                                               {238, 102, 119},
                                                               {34, 136, 51},
                                                               {204, 187, 68},
                                                               {102, 204, 238},
                                                               {170, 51, 119},
                                                               {187, 187, 187}}};
  return palette[k % palette.size()];
}

// t in [0, 1] (clamped; NaN maps to 0).
inline Rgb heat_colour(double t) {
  static constexpr std::array<std::array<double, 3>, 5> anchors = {
      {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
  if (!(t > 0)) t = 0;
  if (t > 1) t = 1;
  const double x = t * (anchors.size() - 1);
  const std::size_t i = std::min<std::size_t>(static_cast<std::size_t>(x), anchors.size() - 2);
  const double f = x - static_cast<double>(i);
  auto mix = [&](int c) {
    return static_cast<std::uint8_t>(std::lround(anchors[i][c] + f * (anchors[i + 1][c] - anchors[i][c])));
  };
  return {mix(0), mix(1), mix(2)};
}

}  // namespace tfw
