// Tables of results as people and programs read them: Markdown, tidy CSV (plain numbers, the
// unit in the column name) and LaTeX that compiles as it is. Shared by `tfw export` and
// `tfw report`. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfw::results {

// A column: its heading for people (md), for LaTeX (math in math mode), and its name in
// CSV (snake case, the unit in the name, so that every cell is a plain number or word).
struct Column {
  std::string title, latex, csv;
};

// A cell: what people read ("82,048", "136 s") and the machine-readable value ("82048",
// "136"); empty raw for a missing value.
struct Cell {
  std::string text, raw;
};

struct Table {
  std::string name;  // "results", "ledger", ...
  std::string title;
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;
};

Cell text_cell(const std::string& text);
// A number shown with `format`, kept exactly for CSV (the shortest text that reads back as
// the same double); "-" for a non-finite value.
Cell number(double value, const char* format = "{:.4f}");
Cell count(std::int64_t value);
Column column(const std::string& title, const std::string& csv);

std::string render_md(const std::vector<Table>& tables);
std::string render_csv(const Table& table);  // one tidy table per file
std::string render_latex(const std::vector<Table>& tables);
std::string latex_escape(const std::string& text);

}  // namespace tfw::results
