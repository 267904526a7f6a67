// A table's columns as the schema has them (PRAGMA table_info), read from a store file on a
// connection of its own, for the tests that hold a one-list-of-columns to the schema.
#pragma once

#include <sqlite3.h>

#include <string>
#include <vector>

namespace tfw::test {

inline std::vector<std::string> schema_columns(const std::string& store_path, const std::string& table) {
  std::vector<std::string> names;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(store_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    const std::string sql = "PRAGMA table_info(" + table + ")";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
      while (sqlite3_step(s) == SQLITE_ROW)
        names.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)));
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return names;
}

}  // namespace tfw::test
