// Data-parallel training over c10d (docs/cluster.md, docs/design/ARCHITECTURE.md "Data-
// parallel training"): where a rank finds its peers, and the process group the trainer uses
// to average gradients. Torch-free: the CLI includes it without compiling torch; the group's
// tensor operations are in engine/dist_group.h.
//
// The world is described by the usual environment: RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT (what torchrun sets), or under Slurm SLURM_PROCID, SLURM_NTASKS and the first
// node of SLURM_STEP_NODELIST. `tfw train --nproc N` sets the former for the ranks it starts.
// Rendezvous goes through c10d's TCPStore, served by rank 0 at MASTER_ADDR:MASTER_PORT.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/config/run_config.h"

namespace tfw {

struct DistEnv {
  int rank = 0, world = 1;
  int local_world = 1;  // ranks on this node (LOCAL_WORLD_SIZE, SLURM_NTASKS_PER_NODE, --nproc)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double timeout_seconds = 300;  // rendezvous and every collective (TFW_DIST_TIMEOUT)
  std::string source;            // "environment" (RANK/WORLD_SIZE), "slurm", "--nproc"
};

// The world the environment describes, or nothing for a single process (no WORLD_SIZE,
// or WORLD_SIZE = 1, and no Slurm job step of more than one task). Throws UsageError for
// values that do not parse or do not fit (RANK >= WORLD_SIZE, a port outside 1..65535).
std::optional<DistEnv> dist_env_from_environment();

// MASTER_PORT, when set (UsageError unless it is a port in 1..65535).
std::optional<int> dist_master_port_from_environment();

// TFW_DIST_TIMEOUT in seconds (default 300); UsageError when it is not a number > 0.
double dist_timeout_from_environment();

// The first host of a Slurm node list: "node[03-05,9],gpu1" -> "node03".
std::string slurm_first_host(const std::string& nodelist);

// A free TCP port on 127.0.0.1 (for --nproc when MASTER_PORT is not set).
int dist_free_port();

// The process group: TCPStore rendezvous, then Gloo (on CPU; docs/cluster.md says what a
// CUDA build would use). Throws UsageError when the port is in use and Error when the
// peers do not arrive within the timeout.
class DistGroup;
std::shared_ptr<DistGroup> dist_connect(const DistEnv& env);
int dist_rank(const DistGroup& group);
int dist_world(const DistGroup& group);
const DistEnv& dist_env(const DistGroup& group);

// Every rank's run config is rank 0's. Rank 0 sends its resolved config; a rank that parsed
// its own (`mine`, null when it has none, e.g. on resume) compares the two, and when any rank
// differs every rank throws a UsageError naming the ranks and the first line that differs,
// before anything is trained or recorded. Returns rank 0's config.
RunConfig dist_agree_config(DistGroup& group, const Registry& registry, const RunConfig* mine);

// Best effort, before a rank exits on an error: leaves `message` in the rendezvous store so
// that the other ranks, whose next collective fails, can say which rank stopped and why.
void dist_report_failure(DistGroup& group, const std::string& message);

}  // namespace tfw
