// The store's schema, as its migrations: one constant per schema version, the SQL that takes
// the schema to it from the version before. See migrations.h.
#include "storage/migrations.h"

namespace tfw::detail {

namespace {

// v1: experiments and their runs, with each run's metrics, checkpoints and events.
constexpr const char* kV1Runs = R"sql(
CREATE TABLE experiments (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  file TEXT NOT NULL DEFAULT '',
  created REAL NOT NULL
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  name TEXT NOT NULL,
  family TEXT NOT NULL,
  config TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued','running','finished','failed','killed','crashed')),
  heartbeat REAL,
  seed INTEGER NOT NULL DEFAULT 0,
  git_commit TEXT NOT NULL DEFAULT '',
  host TEXT NOT NULL DEFAULT '',
  started REAL,
  ended REAL,
  parent_run_id INTEGER REFERENCES runs(id),
  growth_method TEXT NOT NULL DEFAULT '',
  growth_options TEXT NOT NULL DEFAULT '',
  stage INTEGER NOT NULL DEFAULT 0,
  parameters INTEGER NOT NULL DEFAULT 0,
  tokens INTEGER NOT NULL DEFAULT 0,
  flops REAL NOT NULL DEFAULT 0,
  inherited_flops REAL NOT NULL DEFAULT 0,
  cumulative_flops REAL NOT NULL DEFAULT 0,
  final_metrics TEXT NOT NULL DEFAULT '{}',
  error TEXT NOT NULL DEFAULT '',
  run_dir TEXT NOT NULL DEFAULT '',
  UNIQUE (experiment_id, name)
);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_parent ON runs(parent_run_id);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  key TEXT NOT NULL,
  step INTEGER NOT NULL,
  tokens INTEGER NOT NULL,
  flops REAL NOT NULL,
  wall REAL NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, key, step)
) WITHOUT ROWID;
CREATE TABLE checkpoints (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  step INTEGER NOT NULL,
  path TEXT NOT NULL,
  checksum TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created REAL NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  kind TEXT NOT NULL,
  step INTEGER NOT NULL,
  wall REAL NOT NULL,
  payload TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_run ON events(run_id);
)sql";

// v2: the engine service's job queue. Jobs outlive the service: queued ones stay
// queued across a restart, running ones are resumed.
constexpr const char* kV2Jobs = R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('experiment','run')),
  name TEXT NOT NULL,
  file TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('queued','running','finished','failed','cancelled')),
  submitted REAL NOT NULL,
  started REAL,
  ended REAL,
  exit_code INTEGER,
  error TEXT NOT NULL DEFAULT '',
  client TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_status ON jobs(status);
)sql";

// v3: runs submitted to a cluster scheduler (`tfw run --executor slurm`). One row
// per submission of a run; state is the scheduler's own word (PENDING, RUNNING, COMPLETED,
// FAILED, CANCELLED, TIMEOUT, ...), refreshed from squeue/sacct by whoever reads it.
constexpr const char* kV3ClusterJobs = R"sql(
CREATE TABLE cluster_jobs (
  id INTEGER PRIMARY KEY,
  experiment TEXT NOT NULL,
  run TEXT NOT NULL,
  scheduler TEXT NOT NULL,
  job_id TEXT NOT NULL,
  state TEXT NOT NULL,
  script TEXT NOT NULL DEFAULT '',
  log TEXT NOT NULL DEFAULT '',
  submitted REAL NOT NULL,
  updated REAL NOT NULL,
  exit_code INTEGER,
  reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX cluster_jobs_run ON cluster_jobs(experiment, run);
)sql";

// v4: `tfw eval` of a checkpoint on a corpus: one row per metric.
constexpr const char* kV4Evaluations = R"sql(
CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY,
  run_id INTEGER REFERENCES runs(id),
  checkpoint TEXT NOT NULL,
  step INTEGER NOT NULL,
  corpus TEXT NOT NULL,
  metric TEXT NOT NULL,
  value REAL,
  windows INTEGER NOT NULL,
  tokens INTEGER NOT NULL,
  mode TEXT NOT NULL,
  created REAL NOT NULL
);
CREATE INDEX evaluations_run ON evaluations(run_id);
)sql";

// v5: the parameter blocks (train.mask) an evaluation used; '' for every token.
constexpr const char* kV5EvaluationBlocks = R"sql(
ALTER TABLE evaluations ADD COLUMN blocks TEXT NOT NULL DEFAULT '';
)sql";

// v6: the capability a recording client received for each run it created through the
// engine service: only its holder may write to or clear that run.
constexpr const char* kV6RecordGrants = R"sql(
CREATE TABLE record_grants (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  capability TEXT NOT NULL
);
)sql";

// Jobs of the engine service are held by the client that submitted them: only the
// holder of a job's capability may cancel it, or submit again under its name (which resumes
// its runs). Jobs from before have none, and are held by no client.
constexpr const char* kV7JobCapabilities = R"sql(
ALTER TABLE jobs ADD COLUMN capability TEXT NOT NULL DEFAULT '';
)sql";

}  // namespace

// Migration i takes the schema from version i to i + 1. Append, never edit (a new version: its
// constant above, added at the end here).
const std::vector<const char*>& store_migrations() {
  static const std::vector<const char*> migrations = {
      kV1Runs, kV2Jobs, kV3ClusterJobs, kV4Evaluations, kV5EvaluationBlocks, kV6RecordGrants, kV7JobCapabilities,
  };
  return migrations;
}

}  // namespace tfw::detail
