// A prepared statement with typed binds and columns, one-shot exec, and the error message
// for a failed SQLite call (naming the file, with a hint). Not part of the store's API: the
// store's own files use it, and so do the classes that keep their tables in the store on its
// connection (Store::connection()): workbench/service/job_queue.cpp, runner/cluster_jobs.cpp.
// Their libraries link SQLite themselves.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "storage/store.h"

namespace tfw::detail {

// The message for a failed SQLite call on the store at `path`: names the file, and for the
// failures a user can act on, says what to do.
inline std::string store_failure(const std::string& path, int rc, const std::string& message) {
  std::string hint;
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      hint = fmt::format(
          "the store file is damaged. Keep a copy of it (with any {0}-wal and {0}-shm beside it), "
          "then try `sqlite3 {0} .recover > recovered.sql`; see docs/store.md",
          path);
      break;
    case SQLITE_FULL:
      hint = "the disk is full: free space on it, then resume the run (nothing committed is lost)";
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      hint = "check that the folder and the file are writable by this user, or use another --home";
      break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: hint = "another process held the store locked for over a minute; retry when it is done"; break;
    case SQLITE_IOERR: hint = "the disk reported an I/O error (full, removed or failing)"; break;
    default: break;
  }
  const std::string text = fmt::format("store {}: {}", path, message);
  return hint.empty() ? text : with_hint(text, hint);
}

inline std::string db_path(sqlite3* db) {
  const char* name = sqlite3_db_filename(db, "main");
  return name != nullptr ? name : "(memory)";
}

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      throw StoreError(store_failure(db_path(db), sqlite3_errcode(db),
                                     fmt::format("cannot prepare '{}': {}", sql, sqlite3_errmsg(db))));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement& bind(int i, std::int64_t v) { return check(sqlite3_bind_int64(stmt_, i, v)); }
  Statement& bind(int i, double v) { return check(sqlite3_bind_double(stmt_, i, v)); }
  Statement& bind(int i, const std::string& v) {
    return check(sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  Statement& bind_null(int i) { return check(sqlite3_bind_null(stmt_, i)); }
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw StoreError(store_failure(db_path(db_), rc, sqlite3_errmsg(db_)));
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::int64_t integer(int i) { return sqlite3_column_int64(stmt_, i); }
  bool is_null(int i) { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  double real(int i) { return sqlite3_column_double(stmt_, i); }
  std::string text(int i) {
    const unsigned char* p = sqlite3_column_text(stmt_, i);
    return p ? reinterpret_cast<const char*>(p) : "";
  }

 private:
  Statement& check(int rc) {
    if (rc != SQLITE_OK) throw StoreError(fmt::format("store: bind failed: {}", sqlite3_errmsg(db_)));
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

inline void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &message); rc != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    throw StoreError(store_failure(db_path(db), rc, text));
  }
}

}  // namespace tfw::detail
