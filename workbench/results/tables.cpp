// See tables.h.
#include "workbench/results/tables.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "workbench/common/format.h"

namespace tfw::results {

Cell text_cell(const std::string& text) { return {text, text == "-" ? "" : text}; }

std::string render_md(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    out << "### " << t.title << "\n\n|";
    for (const Column& c : t.columns) out << " " << c.title << " |";
    out << "\n|";
    for (std::size_t i = 0; i < t.columns.size(); ++i) out << "---|";
    out << "\n";
    for (const auto& row : t.rows) {
      out << "|";
      for (const Cell& cell : row) out << " " << cell.text << " |";
      out << "\n";
    }
    out << "\n";
  }
  return out.str();
}

std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// One tidy table: a header row of column names, then one row per run of plain values.
std::string render_csv(const Table& t) {
  std::ostringstream out;
  for (std::size_t i = 0; i < t.columns.size(); ++i) out << (i ? "," : "") << csv_cell(t.columns[i].csv);
  out << "\n";
  for (const auto& row : t.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_cell(row[i].raw);
    out << "\n";
  }
  return out.str();
}

std::string latex_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '_':
      case '%':
      case '&':
      case '#':
      case '$':
      case '{':
      case '}':
        out += '\\';
        out += c;
        break;
      case '^': out += "\\^{}"; break;
      case '~': out += "\\~{}"; break;
      case '\\': out += "\\textbackslash{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '<': out += "\\textless{}"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

bool numeric_raw(const std::string& raw) {
  if (raw.empty()) return false;
  char* end = nullptr;
  std::strtod(raw.c_str(), &end);
  return end == raw.c_str() + raw.size();
}

// "1.810e+11" -> "$1.810\times10^{11}$"; any other text escaped as it is.
std::string latex_cell(const std::string& text) {
  static const std::regex scientific(R"(([+-]?[0-9]+(\.[0-9]+)?)e([+-][0-9]+))");
  std::smatch m;
  if (std::regex_match(text, m, scientific)) {
    return fmt::format("${}\\times10^{{{}}}$", m[1].str(), std::stoi(m[3].str()));
  }
  std::string escaped = latex_escape(text);
  for (std::size_t at = 0; (at = escaped.find("\u00b1", at)) != std::string::npos;) {  // "± 0.0279"
    escaped.replace(at, 2, "$\\pm$");
    at += 5;
  }
  return escaped;
}

}  // namespace

std::string render_latex(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    // Columns that are empty in every row are left out; a column whose values are all numbers
    // is aligned right; a text column with long cells (a paper's source) wraps in a
    // paragraph column, so that the table need not shrink far.
    std::vector<std::size_t> kept;
    std::string align;
    for (std::size_t i = 0; i < t.columns.size(); ++i) {
      bool any = false, numbers = true;
      std::size_t longest = 0;
      for (const auto& row : t.rows) {
        if (i >= row.size() || row[i].raw.empty()) continue;
        any = true;
        numbers = numbers && numeric_raw(row[i].raw);
        longest = std::max(longest, row[i].text.size());
      }
      if (!any && !t.rows.empty()) continue;
      kept.push_back(i);
      align += any && numbers ? "r" : longest > 24 ? "p{3cm}" : "l";
    }
    // A table float with the title as its caption; booktabs rules; shrunk to the line width
    // only when it is wider (graphicx).
    std::string label;
    for (char c : t.title.substr(0, t.title.find(':'))) label += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    out << "% " << t.title << "\n% needs \\usepackage{booktabs} and \\usepackage{graphicx}\n"
        << "\\begin{table}[htbp]\n\\centering\n\\caption{" << latex_escape(t.title) << "}\n\\label{tab:" << label << "-"
        << t.name << "}\n"
        << "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n"
        << "\\begin{tabular}{" << align << "}\n\\toprule\n";
    for (std::size_t k = 0; k < kept.size(); ++k) out << (k ? " & " : "") << t.columns[kept[k]].latex;
    out << " \\\\\n\\midrule\n";
    for (const auto& row : t.rows) {
      for (std::size_t k = 0; k < kept.size(); ++k) {
        out << (k ? " & " : "") << (kept[k] < row.size() ? latex_cell(row[kept[k]].text) : "");
      }
      out << " \\\\\n";
    }
    out << "\\bottomrule\n\\end{tabular}}\n\\end{table}\n\n";
  }
  return out.str();
}

Column column(const std::string& title, const std::string& csv) { return {title, latex_escape(title), csv}; }

Cell number(double value, const char* format) {
  if (!std::isfinite(value)) return {"-", ""};
  return {fmt::format(fmt::runtime(format), value), fmt::format("{}", value)};
}

Cell count(std::int64_t value) { return {grouped(value), std::to_string(value)}; }

}  // namespace tfw::results
