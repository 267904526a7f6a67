// See format.h.
#include "workbench/common/format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

namespace tfw {

std::string grouped(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return value < 0 ? "-" + out : out;
}

std::string short_count(double value) {
  double magnitude = std::fabs(value);
  if (magnitude >= 1e9) return fmt::format("{:.3f}B", value / 1e9);
  if (magnitude >= 1e6) return fmt::format("{:.1f}M", value / 1e6);
  if (magnitude >= 1e3) return fmt::format("{:.1f}K", value / 1e3);
  return fmt::format("{}", value);
}

std::string scientific(double value) { return fmt::format("{:.3e}", value); }

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  constexpr double kDay = 86400, kYear = 365.25 * kDay;
  if (seconds >= 10 * kYear) return grouped(static_cast<std::int64_t>(std::llround(seconds / kYear))) + " years";
  if (seconds >= kYear) return fmt::format("{:.1f} years", seconds / kYear);
  const auto s = static_cast<long>(seconds);
  if (s >= 2 * 86400) return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string float_text(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // n: nan, inf
  return text;
}

std::string toml_value_as_written(const std::string& text) {
  // Only a plain float literal: digits with a '.' or an exponent (not a string, date or array).
  if (text.empty() || text.find_first_of(".eE") == std::string::npos) return text;
  if (text.find_first_not_of("0123456789+-.eE_") != std::string::npos) return text;
  std::string digits;
  for (char c : text) {
    if (c != '_') digits += c;
  }
  char* end = nullptr;
  const double value = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size()) return text;
  return float_text(value);
}

std::string toml_as_written(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    const std::size_t eq = line.find(" = ");
    if (eq != std::string::npos && line.find_first_of("\"'[") > eq) {
      line = line.substr(0, eq + 3) + toml_value_as_written(line.substr(eq + 3));
    }
    out += line;
    if (end < text.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

std::string text_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool is_right = i < right.size() && right[i];
      const bool last = i + 1 == row.size();
      if (i > 0) line += "  ";
      if (is_right)
        line += std::string(width[i] - row[i].size(), ' ') + row[i];
      else
        line += last ? row[i] : row[i] + std::string(width[i] - row[i].size(), ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string local_time(double unix_seconds, const char* format) {
  if (unix_seconds <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  char text[64];
  std::strftime(text, sizeof(text), format, std::localtime(&t));
  return text;
}

namespace {

// The share of the budget at `p`; -1 when no budget is set.
double budget_fraction(const RunBudget& budget, const RunPoint& p) {
  double f = -1;
  if (budget.max_steps > 0)
    f = static_cast<double>(p.step) / static_cast<double>(budget.max_steps);
  else if (budget.max_tokens > 0)
    f = static_cast<double>(p.tokens) / budget.max_tokens;
  else if (budget.max_flops > 0)
    f = p.flops / budget.max_flops;
  return f < 0 ? -1 : std::min(f, 1.0);
}

}  // namespace

RunProgress run_progress(const RunBudget& budget, const RunPoint& first, const RunPoint& latest) {
  RunProgress progress;
  progress.fraction = budget_fraction(budget, latest);
  const double done = progress.fraction - budget_fraction(budget, first), seconds = latest.wall - first.wall;
  if (progress.fraction >= 0 && done > 0 && seconds > 0) {
    progress.eta_seconds = seconds / done * (1 - progress.fraction);
  }
  return progress;
}

std::string progress_text(const RunBudget& budget, const RunPoint& first, const RunPoint& latest) {
  const RunProgress progress = run_progress(budget, first, latest);
  std::string text = budget.max_steps > 0 ? fmt::format("step {} of {}", latest.step, budget.max_steps)
                                          : fmt::format("step {}", latest.step);
  if (progress.fraction >= 0) text += fmt::format(" ({:.0f}%)", 100 * progress.fraction);
  text += ", " + short_count(static_cast<double>(latest.tokens)) + " tokens";
  if (budget.max_steps <= 0 && budget.max_tokens > 0) text += " of " + short_count(budget.max_tokens);
  if (budget.max_steps <= 0 && budget.max_tokens <= 0 && budget.max_flops > 0) {
    text += fmt::format(", {:.3g} of {:.3g} FLOPs", latest.flops, budget.max_flops);
  }
  if (progress.eta_seconds >= 0) text += ", " + duration_text(progress.eta_seconds) + " left";
  return text;
}

std::vector<std::string> wrap_at_spaces(const std::string& text, double width,
                                        const std::function<double(const std::string&)>& measure) {
  std::vector<std::string> lines;
  const double space = measure(" ");
  std::size_t line_begin = 0;
  while (line_begin < text.size()) {
    std::size_t line_end = text.find('\n', line_begin);
    if (line_end == std::string::npos) line_end = text.size();
    // A line's indentation stays with its first word ("  hint: ..." under an error).
    std::size_t first = line_begin;
    while (first < line_end && text[first] == ' ') ++first;
    std::string line;
    double used = -1;  // < 0: nothing on this line yet
    for (std::size_t i = first; i < line_end;) {
      std::size_t j = text.find(' ', i);
      if (j == std::string::npos || j > line_end) j = line_end;
      std::string word = text.substr(i, j - i);
      if (i == first) word = text.substr(line_begin, first - line_begin) + word;
      i = j + 1;
      if (word.empty()) continue;
      const double w = measure(word);
      if (used >= 0 && used + space + w <= width) {
        line += " " + word;
        used += space + w;
      } else {
        if (used >= 0) lines.push_back(line);
        line = word;
        used = w;
      }
    }
    lines.push_back(line);  // an empty line between two is kept (a paragraph's break)
    line_begin = line_end + 1;
  }
  return lines;
}

}  // namespace tfw
