// Store files in the GUI tests: a file's bytes (to prove a reader left it untouched), and a
// store marked as written by a newer tfw (schema version 99), checkpointed into one file.
#pragma once

#include <sqlite3.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tfw::test {

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline void mark_newer_schema(const std::string& db_path) {
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE; PRAGMA user_version = 99", nullptr,
               nullptr, nullptr);
  sqlite3_close(db);
}

}  // namespace tfw::test
