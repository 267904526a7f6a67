// The SQLite run store. See store.h and docs/store.md.
#include "storage/store.h"
#include "storage/migrations.h"
#include "storage/run_columns.h"
#include "storage/sqlite_statement.h"

#include <fstream>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace tfw {

using detail::db_path;
using detail::exec;
using detail::Statement;
using detail::store_failure;

namespace {

namespace fs = std::filesystem;

// Whether a freshly opened connection's file is an SQLite database. Asked through SQLite
// itself: the file is never opened with anything but SQLite, because on POSIX closing ANY
// descriptor of a file releases every fcntl lock this process holds on it. An std::ifstream
// peek at the header, in a process that already held a connection (the service, a writer
// thread), dropped that connection's locks; another process then believed it was the last
// one, checkpointed and deleted the WAL under it, and the store was corrupted.
// SQLite reads the header and answers SQLITE_NOTADB without writing to a foreign file.
void check_is_database(sqlite3* db, const std::string& path) {
  sqlite3_busy_timeout(db, 60000);
  const int rc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) return;
  const std::string message = sqlite3_errmsg(db);
  sqlite3_close_v2(db);
  if (rc == SQLITE_NOTADB) {
    throw StoreError(
        with_hint(fmt::format("'{}' is not a tfw store (not an SQLite file); it was left untouched", path),
                  "point --home / TFW_HOME at a folder whose runs.db is a tfw store, or move the file away"));
  }
  throw StoreError(store_failure(path, rc, message));
}

// A connection to the store file `path` opened with `flags` (sqlite3_open_v2's), checked to be
// a database; throws StoreError (the connection closed) when either fails.
sqlite3* database_open(const std::string& path, int flags) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    throw StoreError(fmt::format("cannot open the store '{}': {}", path, message));
  }
  check_is_database(db, path);
  return db;
}

// Holds an exclusive flock on <path>.lock for the lifetime of the object.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open((path + ".lock").c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ < 0) throw StoreError(fmt::format("store: cannot create the lock file {}.lock", path));
    ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_;
};

RunRecord run_from(Statement& s) {
  RunRecord r;
  detail::run_read(s, r);
  // A running run whose heartbeat stopped is reported as crashed.
  if (r.status == RunStatus::running && store_now() - r.heartbeat > store_heartbeat_timeout()) {
    r.status = RunStatus::crashed;
  }
  return r;
}

}  // namespace

double store_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double store_heartbeat_timeout() {
  if (const char* env = std::getenv("TFW_HEARTBEAT_TIMEOUT")) {
    char* end = nullptr;
    double value = std::strtod(env, &end);
    if (end != env && value > 0) return value;
  }
  return 30.0;
}

Store::Store(sqlite3* db, std::string path, bool readonly) : db_(db), path_(std::move(path)), readonly_(readonly) {
  std::error_code ec;
  home_ = fs::weakly_canonical(fs::absolute(path_, ec).parent_path(), ec).string();
}

// Paths inside the home are stored relative to it, so that a copied or moved home keeps
// working (its runs resume in the copy, not in the original). Others stay as given.
std::string Store::to_stored(const std::string& path) const {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path full = fs::weakly_canonical(fs::absolute(path, ec), ec);
  const std::string text = full.string();
  if (!ec && text.size() > home_.size() && text.compare(0, home_.size(), home_) == 0 && text[home_.size()] == '/') {
    return text.substr(home_.size() + 1);
  }
  return path;
}

std::string Store::from_stored(const std::string& path) const {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(home_) / path).string();
}

Store::~Store() { sqlite3_close_v2(db_); }

std::unique_ptr<Store> Store::open(const std::string& path) {
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
  sqlite3* db = database_open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX);
  std::unique_ptr<Store> store(new Store(db, path, false));
  sqlite3_busy_timeout(db, 60000);
  exec(db, "PRAGMA foreign_keys = ON");
  store->migrate();
  exec(db, "PRAGMA synchronous = NORMAL");
  return store;
}

std::unique_ptr<Store> Store::open_readonly(const std::string& path) {
  if (!fs::exists(path)) {
    throw StoreError(with_hint(fmt::format("no store at '{}'", path),
                               "runs are recorded there by `tfw train`; check --home / TFW_HOME"));
  }
  sqlite3* db = database_open(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX);
  std::unique_ptr<Store> store(new Store(db, path, true));
  sqlite3_busy_timeout(db, 60000);
  const int version = store->schema_version();
  if (version > kStoreSchemaVersion) {
    throw StoreError(with_hint(fmt::format("the store '{}' has schema version {}, this tfw knows up to {}", path,
                                           version, kStoreSchemaVersion),
                               "use a newer tfw to read it"));
  }
  if (version < kStoreSchemaVersion) {
    // An older store: migrate it forward once (the migrations only add), then read it.
    store.reset();
    try {
      Store::open(path).reset();
    } catch (const StoreError& e) {
      throw StoreError(fmt::format("the store '{}' has schema version {} (current {}) and could not be migrated: {}",
                                   path, version, kStoreSchemaVersion, e.what()));
    }
    return open_readonly(path);
  }
  return store;
}

int Store::schema_version() {
  try {
    Statement s(db_, "PRAGMA user_version");
    s.step();
    return static_cast<int>(s.integer(0));
  } catch (const StoreError& e) {
    throw StoreError(fmt::format("'{}' is not a usable tfw store: {}", path_, e.what()));
  }
}

void store_create_at_version(const std::string& path, int version) {
  if (version < 0 || version > kStoreSchemaVersion) throw StoreError(fmt::format("no schema version {}", version));
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(db);
    throw StoreError(fmt::format("cannot create '{}'", path));
  }
  exec(db, "PRAGMA journal_mode = WAL");
  for (int v = 0; v < version; ++v) exec(db, detail::store_migrations()[static_cast<std::size_t>(v)]);
  exec(db, fmt::format("PRAGMA user_version = {}", version).c_str());
  sqlite3_close_v2(db);
}

void Store::migrate() {
  FileLock lock(path_);  // parallel first opens: one migrates, the others then see the result
  const int version = schema_version();
  if (version > kStoreSchemaVersion) {
    throw StoreError(with_hint(fmt::format("the store '{}' has schema version {}, this tfw knows up to {}", path_,
                                           version, kStoreSchemaVersion),
                               "use a newer tfw, or another --home"));
  }
  exec(db_, "PRAGMA journal_mode = WAL");
  for (int v = version; v < kStoreSchemaVersion; ++v) {
    transaction([&] {
      exec(db_, detail::store_migrations()[static_cast<std::size_t>(v)]);
      exec(db_, fmt::format("PRAGMA user_version = {}", v + 1).c_str());
    });
  }
}

std::int64_t Store::experiment_ensure(const std::string& name, const std::string& file) {
  Statement insert(db_, "INSERT INTO experiments (name, file, created) VALUES (?, ?, ?) ON CONFLICT(name) DO NOTHING");
  insert.bind(1, name).bind(2, file).bind(3, store_now()).step();
  Statement select(db_, "SELECT id FROM experiments WHERE name = ?");
  select.bind(1, name);
  select.step();
  return select.integer(0);
}

std::int64_t Store::run_create(const RunRecord& run) {
  const std::int64_t experiment = experiment_ensure(run.experiment);
  double inherited = std::max(0.0, run.inherited_flops);
  if (run.parent != 0) {
    std::optional<RunRecord> parent = run_get(run.parent);
    if (!parent) throw StoreError(fmt::format("store: parent run {} does not exist", run.parent));
    if (run.inherited_flops < 0) inherited = parent->cumulative_flops;
  }
  // What a new run starts with: now, no end, no final metrics or error (the schema's defaults).
  RunRecord row = run;
  row.heartbeat = row.started = store_now();
  row.ended = 0;
  row.inherited_flops = inherited;
  row.cumulative_flops = inherited + run.flops;
  row.final_metrics = FinalMetrics{};
  row.error.clear();
  row.run_dir = to_stored(run.run_dir);
  Statement s(db_, detail::run_insert_sql().c_str());
  detail::run_bind(s, experiment, row);
  try {
    s.step();
  } catch (const StoreError& e) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_UNIQUE) {
      throw StoreError(
          with_hint(fmt::format("a run named '{}' already exists in experiment '{}'", run.name, run.experiment),
                    fmt::format("resume it with `tfw train --resume {}`, or choose another --name", run.name)));
    }
    throw;
  }
  return sqlite3_last_insert_rowid(db_);
}

std::int64_t Store::run_insert(const RunRecord& run) {
  const std::int64_t experiment = experiment_ensure(run.experiment);
  RunRecord row = run;
  row.run_dir = to_stored(run.run_dir);
  Statement s(db_, detail::run_insert_sql().c_str());
  detail::run_bind(s, experiment, row);
  s.step();
  return sqlite3_last_insert_rowid(db_);
}

void Store::transaction(const std::function<void()>& body) {
  exec(db_, "BEGIN IMMEDIATE");
  try {
    body();
    exec(db_, "COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void Store::run_set_config(std::int64_t run, const std::string& config, const EventRow& event) {
  transaction([&] {
    Statement s(db_, "UPDATE runs SET config = ? WHERE id = ?");
    s.bind(1, config).bind(2, run).step();
    if (sqlite3_changes(db_) != 1) throw StoreError(fmt::format("store: run {} does not exist", run));
    EventRow row = event;
    row.run = run;
    event_add(row);
  });
}

void Store::run_set_status(std::int64_t run, RunStatus status, const std::string& error) {
  Statement s(db_,
              "UPDATE runs SET status = ?, error = ?, heartbeat = ?, ended = CASE WHEN ? = 'running' THEN NULL "
              "ELSE ended END WHERE id = ?");
  s.bind(1, std::string(status_name(status)))
      .bind(2, error)
      .bind(3, store_now())
      .bind(4, std::string(status_name(status)))
      .bind(5, run)
      .step();
}

void Store::run_set_progress(std::int64_t run, std::int64_t tokens, double flops) {
  Statement s(db_, "UPDATE runs SET tokens = ?, flops = ?, cumulative_flops = inherited_flops + ? WHERE id = ?");
  s.bind(1, tokens).bind(2, flops).bind(3, flops).bind(4, run).step();
}

void Store::run_finish(std::int64_t run, RunStatus status, const std::string& final_metrics, const std::string& error) {
  Statement s(db_, "UPDATE runs SET status = ?, final_metrics = ?, error = ?, ended = ?, heartbeat = ? WHERE id = ?");
  const double now = store_now();
  s.bind(1, std::string(status_name(status)))
      .bind(2, final_metrics.empty() ? std::string("{}") : final_metrics)
      .bind(3, error)
      .bind(4, now)
      .bind(5, now)
      .bind(6, run)
      .step();
}

void Store::run_heartbeat(std::int64_t run) {
  Statement s(db_, "UPDATE runs SET heartbeat = ? WHERE id = ?");
  s.bind(1, store_now()).bind(2, run).step();
}

RunRecord Store::resolved(RunRecord record) const {
  record.run_dir = from_stored(record.run_dir);
  return record;
}

std::vector<RunRecord> Store::run_children(std::int64_t run) {
  Statement s(db_, fmt::format("SELECT {} FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE "
                               "r.parent_run_id = ? ORDER BY r.id",
                               detail::run_select_columns())
                       .c_str());
  s.bind(1, run);
  std::vector<RunRecord> out;
  while (s.step()) out.push_back(resolved(run_from(s)));
  return out;
}

void Store::run_delete(std::int64_t run) {
  if (!run_children(run).empty()) {
    throw StoreError(fmt::format("run {} has runs grown from it; delete them first", run));
  }
  transaction([&] {
    for (const char* sql : {"DELETE FROM metrics WHERE run_id = ?", "DELETE FROM checkpoints WHERE run_id = ?",
                            "DELETE FROM events WHERE run_id = ?", "DELETE FROM evaluations WHERE run_id = ?",
                            "DELETE FROM record_grants WHERE run_id = ?", "DELETE FROM runs WHERE id = ?"}) {
      Statement s(db_, sql);
      s.bind(1, run).step();
    }
  });
}

std::optional<RunRecord> Store::run_get(std::int64_t run) {
  Statement s(db_, fmt::format("SELECT {} FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.id = ?",
                               detail::run_select_columns())
                       .c_str());
  s.bind(1, run);
  if (!s.step()) return std::nullopt;
  return resolved(run_from(s));
}

std::optional<RunRecord> Store::run_find(const std::string& id_or_name) {
  char* end = nullptr;
  const long long id = std::strtoll(id_or_name.c_str(), &end, 10);
  if (!id_or_name.empty() && end != nullptr && *end == '\0') return run_get(id);
  Statement s(db_, fmt::format("SELECT {} FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.name = ? "
                               "ORDER BY r.id DESC LIMIT 1",
                               detail::run_select_columns())
                       .c_str());
  s.bind(1, id_or_name);
  if (!s.step()) return std::nullopt;
  return resolved(run_from(s));
}

std::vector<RunRecord> Store::runs(const RunFilter& filter) {
  static const std::set<std::string> sortable = {
      "id", "name", "started", "tokens", "flops", "cumulative_flops", "parameters", "family", "status"};
  if (!sortable.count(filter.sort)) {
    throw StoreError(with_hint(fmt::format("cannot sort runs by '{}'", filter.sort),
                               "sort by one of id, name, family, status, started, tokens, flops, cumulative_flops, "
                               "parameters"));
  }
  std::string sql = fmt::format(
      "SELECT {} FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE "
      "(?1 = '' OR e.name = ?1) AND (?2 = '' OR r.family = ?2) ORDER BY r.{} {}",
      detail::run_select_columns(), filter.sort, filter.descending ? "DESC" : "ASC");
  Statement s(db_, sql.c_str());
  s.bind(1, filter.experiment).bind(2, filter.family);
  std::vector<RunRecord> out;
  while (s.step()) {
    RunRecord r = resolved(run_from(s));
    if (!filter.status || r.status == *filter.status) out.push_back(std::move(r));  // crashed is derived
  }
  return out;
}

std::optional<RunRecord> Store::run_in_experiment(const std::string& experiment, const std::string& name) {
  Statement s(db_, fmt::format("SELECT {} FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = ? "
                               "AND r.name = ?",
                               detail::run_select_columns())
                       .c_str());
  s.bind(1, experiment).bind(2, name);
  if (!s.step()) return std::nullopt;
  return resolved(run_from(s));
}

std::vector<RunRecord> Store::lineage(std::int64_t run) {
  std::vector<RunRecord> chain;
  std::set<std::int64_t> seen;
  for (std::int64_t id = run; id != 0 && !seen.count(id);) {
    seen.insert(id);
    std::optional<RunRecord> r = run_get(id);
    if (!r) break;
    chain.insert(chain.begin(), *r);
    id = r->parent;
  }
  return chain;
}

void Store::checkpoint_add(const CheckpointRow& row) {
  Statement s(db_,
              "INSERT OR REPLACE INTO checkpoints (run_id, step, path, checksum, bytes, created) VALUES "
              "(?, ?, ?, ?, ?, ?)");
  s.bind(1, row.run)
      .bind(2, row.step)
      .bind(3, to_stored(row.path))
      .bind(4, row.checksum)
      .bind(5, row.bytes)
      .bind(6, store_now())
      .step();
}

void Store::checkpoint_remove(std::int64_t run, const std::string& path) {
  Statement s(db_, "DELETE FROM checkpoints WHERE run_id = ? AND path IN (?, ?)");
  s.bind(1, run).bind(2, to_stored(path)).bind(3, path).step();
}

std::vector<CheckpointRow> Store::checkpoints(std::int64_t run) {
  Statement s(db_, "SELECT run_id, step, bytes, path, checksum FROM checkpoints WHERE run_id = ? ORDER BY step");
  s.bind(1, run);
  std::vector<CheckpointRow> out;
  while (s.step()) out.push_back({s.integer(0), s.integer(1), s.integer(2), from_stored(s.text(3)), s.text(4)});
  return out;
}

std::string capability_new() {
  unsigned char bytes[16];
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    throw StoreError("cannot read /dev/urandom for a capability");
  }
  std::string capability;
  for (unsigned char b : bytes) capability += fmt::format("{:02x}", b);
  return capability;
}

bool capability_equal(const std::string& stored, const std::string& given) {
  if (stored.size() != given.size() || stored.empty()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < stored.size(); ++i) differ |= static_cast<unsigned char>(stored[i] ^ given[i]);
  return differ == 0;
}

std::string Store::record_grant(std::int64_t run) {
  const std::string capability = capability_new();
  Statement s(db_, "INSERT OR REPLACE INTO record_grants (run_id, capability) VALUES (?, ?)");
  s.bind(1, run).bind(2, capability).step();
  return capability;
}

bool Store::record_granted(std::int64_t run, const std::string& capability) {
  Statement s(db_, "SELECT capability FROM record_grants WHERE run_id = ?");
  s.bind(1, run);
  return s.step() && capability_equal(s.text(0), capability);
}

std::int64_t Store::checkpoint_rename(const std::string& from, const std::string& to, const std::string& checksum,
                                      std::int64_t bytes) {
  std::int64_t changed = 0;
  transaction([&] {
    Statement a(db_, "UPDATE checkpoints SET path = ?, checksum = ?, bytes = ? WHERE path IN (?, ?)");
    a.bind(1, to_stored(to)).bind(2, checksum).bind(3, bytes).bind(4, to_stored(from)).bind(5, from).step();
    changed += sqlite3_changes(db_);
    Statement b(db_, "UPDATE evaluations SET checkpoint = ? WHERE checkpoint IN (?, ?)");
    b.bind(1, to_stored(to)).bind(2, to_stored(from)).bind(3, from).step();
    changed += sqlite3_changes(db_);
  });
  return changed;
}

std::optional<std::int64_t> Store::checkpoint_run(const std::string& path) {
  Statement s(db_, "SELECT run_id FROM checkpoints WHERE path IN (?, ?) ORDER BY created DESC LIMIT 1");
  s.bind(1, to_stored(path)).bind(2, path);
  if (!s.step()) return std::nullopt;
  return s.integer(0);
}

void Store::event_add(const EventRow& row) {
  Statement s(db_, "INSERT INTO events (run_id, kind, step, wall, payload) VALUES (?, ?, ?, ?, ?)");
  s.bind(1, row.run)
      .bind(2, row.kind)
      .bind(3, row.step)
      .bind(4, row.wall)
      .bind(5, row.payload.empty() ? std::string("{}") : row.payload)
      .step();
}

std::vector<EventRow> Store::events(std::int64_t run) {
  Statement s(db_, "SELECT run_id, step, kind, payload, wall, id FROM events WHERE run_id = ? ORDER BY id");
  s.bind(1, run);
  std::vector<EventRow> out;
  while (s.step()) out.push_back({s.integer(0), s.integer(1), s.text(2), s.text(3), s.real(4), s.integer(5)});
  return out;
}

void Store::metrics_append(const std::vector<MetricPoint>& points) {
  // Replace: a resumed run re-logs the steps after its last checkpoint.
  Statement s(db_,
              "INSERT OR REPLACE INTO metrics (run_id, key, step, tokens, flops, wall, value) VALUES "
              "(?, ?, ?, ?, ?, ?, ?)");
  for (const MetricPoint& p : points) {
    s.bind(1, p.run).bind(2, p.key).bind(3, p.step).bind(4, p.tokens).bind(5, p.flops).bind(6, p.wall);
    if (std::isfinite(p.value))
      s.bind(7, p.value);
    else
      s.bind_null(7);
    s.step();
    s.reset();
  }
}

void Store::metrics_insert(const std::vector<MetricPoint>& points) {
  if (points.empty()) return;
  transaction([&] { metrics_append(points); });
}

std::vector<MetricPoint> Store::metrics(std::int64_t run, const std::string& key) {
  Statement s(db_,
              "SELECT run_id, key, step, tokens, flops, wall, value FROM metrics WHERE run_id = ?1 AND "
              "(?2 = '' OR key = ?2) ORDER BY key, step");
  s.bind(1, run).bind(2, key);
  std::vector<MetricPoint> out;
  while (s.step()) {
    out.push_back({s.integer(0), s.text(1), s.integer(2), s.integer(3), s.real(4), s.real(5),
                   s.is_null(6) ? std::nan("") : s.real(6)});
  }
  return out;
}

std::int64_t Store::metrics_count(std::int64_t run) {
  Statement s(db_, "SELECT COUNT(*) FROM metrics WHERE run_id = ?");
  s.bind(1, run);
  s.step();
  return s.integer(0);
}

bool Store::integrity_ok() {
  Statement s(db_, "PRAGMA integrity_check");
  return s.step() && s.text(0) == "ok";
}

}  // namespace tfw
