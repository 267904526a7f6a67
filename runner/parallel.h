// `tfw train` over one process or many (data parallelism, engine/dist/distributed.h): the entry
// point that `tfw train` and the Slurm executor's job scripts go through.
// - One process: run_recorded.
// - `nproc` > 1: this process becomes rank 0 and starts ranks 1..N-1 as children (the same
//   executable, `tfw train`, with RANK, WORLD_SIZE, MASTER_ADDR = 127.0.0.1 and MASTER_PORT
//   set, the threads split between them); it waits for them and names any that died.
// - The environment describes a world (torchrun's variables, or an srun job step): this
//   process is the rank it names. Rank 0 records the run; the others only train.
// docs/cluster.md, docs/design/ARCHITECTURE.md "Data-parallel training".
#pragma once

#include <atomic>

#include "runner/recorded_run.h"

namespace tfw::runner {

// Throws UsageError for nproc < 1, and for nproc > 1 when the environment already names a
// world. Every rank's failure is left in the rendezvous store for the others to name.
RunOutcome run_parallel(const Registry& registry, const RunRequest& request, int nproc, const std::atomic<bool>* stop,
                        const RunHooks& hooks);

}  // namespace tfw::runner
