// See tables.h.
#include "workbench/results/tables.h"

#include <cmath>
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
      case '_': case '%': case '&': case '#': case '$': case '{': case '}':
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

std::string render_latex(const std::vector<Table>& tables) {
  std::ostringstream out;
  for (const Table& t : tables) {
    out << "% " << t.title << "\n\\begin{tabular}{" << std::string(t.columns.size(), 'l') << "}\n\\hline\n";
    for (std::size_t i = 0; i < t.columns.size(); ++i) out << (i ? " & " : "") << t.columns[i].latex;
    out << " \\\\\n\\hline\n";
    for (const auto& row : t.rows) {
      for (std::size_t i = 0; i < row.size(); ++i) out << (i ? " & " : "") << latex_escape(row[i].text);
      out << " \\\\\n";
    }
    out << "\\hline\n\\end{tabular}\n\n";
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
