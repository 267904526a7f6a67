// Number, time and duration formatting shared by the CLI and the GUI. No dependencies
// beyond fmt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tfw {

std::string grouped(std::int64_t value);  // 151881216 -> "151,881,216"
std::string short_count(double value);    // 151881216 -> "151.9M", 1.3e9 -> "1.310B"
std::string scientific(double value);     // 3.1e14 -> "3.10e+14"
// 75 -> "1m15s", 3725 -> "1h02m", 2 days and more -> "3d04h", a year and more -> "2.4 years",
// ten years and more -> "5,478 years"; NaN or negative -> "?".
std::string duration_text(double seconds);
std::string local_time(double unix_seconds, const char* format = "%Y-%m-%d %H:%M");  // "-" for 0

// A number as a person would write it: the shortest text that reads back as the same double
// (0.9, not 0.90000000000000002), still looking like a float ("1.0", not "1").
std::string float_text(double value);
// A TOML value's text with a float in it written as above ("0.90000000000000002" -> "0.9");
// any other text (strings, integers, arrays) as it is.
std::string toml_value_as_written(const std::string& text);
// A TOML document's `key = float` lines written as above, everything else as it is (for showing
// a stored config; the stored text itself is not changed).
std::string toml_as_written(const std::string& text);

// Text broken into lines no wider than `width` at spaces only, never inside a word: a path, a
// JSON object or a config value stays whole (on a line of its own when it is wider than
// `width`). `measure` gives a string's width in the caller's units (pixels in the GUI). Line
// breaks in the text are kept (a final one adds no empty line), a line's leading spaces stay
// with its first word, and runs of spaces between words become one. No lines for "".
std::vector<std::string> wrap_at_spaces(const std::string& text, double width,
                                        const std::function<double(const std::string&)>& measure);

// How far a running run is through its budget (train.max_steps, max_tokens or max_flops: the
// one that is set), and the time left at the rate between two of its recorded points (the
// first and the latest a reader has: step, tokens, own FLOPs, wall seconds since it started).
struct RunBudget {
  std::int64_t max_steps = 0;
  double max_tokens = 0, max_flops = 0;
};
struct RunPoint {
  std::int64_t step = 0, tokens = 0;
  double flops = 0, wall = 0;
};
struct RunProgress {
  double fraction = -1;     // of the budget, in [0, 1]; -1: no budget is set
  double eta_seconds = -1;  // -1: no rate yet (one point, or no time between the two)
};
RunProgress run_progress(const RunBudget& budget, const RunPoint& first, const RunPoint& latest);
// "step 50 of 200 (25%), 1.6k tokens, 2m30s left" (parts it cannot say are left out).
std::string progress_text(const RunBudget& budget, const RunPoint& first, const RunPoint& latest);

// Columns padded to their widest cell, two spaces apart; `right[i]`: column i aligned right
// (numbers). The first row is the header. No cell is cut.
std::string text_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right = {});

}  // namespace tfw
