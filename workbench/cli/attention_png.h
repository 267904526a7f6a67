// The PNG of a parameter-attention map, for papers and notes: a title (run, checkpoint,
// layer, projection), the heat map Θ(S) with the input tokens labelled on the rows (a space
// shows as ␣) and parameter-token indices on the columns, a mark where grown tokens begin,
// and a colour bar with the value range. Text is rasterised with stb_truetype from DejaVu
// Sans (Debian's fonts-dejavu-core); without the font the labels are left out.
#pragma once

#include <string>

#include "engine/commands/attention_map.h"

namespace tfw::cli {

// Where the heat map sits in the image (for tests and scripts): its top-left pixel and the
// size of one cell (one input token × one parameter token).
struct HeatmapLayout {
  int width = 0, height = 0;  // the whole image
  int x = 0, y = 0;           // the heat map's top-left
  int cell_width = 0, cell_height = 0;
  bool labelled = false;  // the font was found and the text drawn
};

HeatmapLayout attention_png_write(const AttentionMap& map, const std::string& title, const std::string& path);

// An image classifier's map (map.image set): the image with its patch grid, and beside it the
// image under the scores of one parameter token over the patches, with a colour bar. Returns
// where the second panel sits (cell: one patch).
HeatmapLayout attention_patches_png_write(const AttentionMap& map, std::int64_t parameter_token,
                                          const std::string& title, const std::string& path);

}  // namespace tfw::cli
