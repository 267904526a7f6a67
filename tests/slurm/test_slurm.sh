#!/usr/bin/env bash
# `tfw run --executor slurm` on a real single-node Slurm (tests/slurm/cluster.sh starts it and
# stops it again by its pids):
#  1. a two-stage experiment plus a baseline: one job array for the independent runs, the
#     grown stage after its parent (afterok); the store has the jobs, their states, the runs
#     and the lineage; the scripts are kept; running the file again submits nothing;
#  2. cancel a running job with `tfw cancel --slurm`: its training checkpoints, its child is
#     cancelled by Slurm; running the file again (--wait) resubmits only those two, and the
#     cancelled run resumes from its checkpoint;
#  3. a run with --nproc 2 trains over 2 ranks started by srun;
#  4. bad input: an unknown executor, an option sbatch refuses (its message is passed on),
#     cancelling what is not there; nothing is recorded.
#
#   bash tests/slurm/test_slurm.sh TFW_BINARY
set -uo pipefail
tfw=${1:?usage: test_slurm.sh TFW_BINARY}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d /tmp/tfw-test-slurm.XXXXXX)
cluster="$work/cluster"
failures=0
cleanup() {
  bash "$root/tests/slurm/cluster.sh" down "$cluster"
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() {  # check DESCRIPTION COMMAND...: the command must succeed
  local what=$1; shift
  if ! "$@"; then fail "$what"; fi
}
contains() { grep -qF -- "$2" <<< "$1"; }
sql() { sqlite3 "$1/runs.db" "$2"; }
# Waits until every Slurm job of the store is final (at most $2 seconds).
wait_jobs() {
  local home=$1 limit=$2 states
  for _ in $(seq $((limit * 2))); do
    states=$("$tfw" jobs --slurm --home "$home" --json | /usr/bin/python3 -c \
      "import json,sys; print(' '.join(j['state'] for j in json.load(sys.stdin)['jobs']))")
    if ! grep -qE 'PENDING|RUNNING|CONFIGURING|COMPLETING' <<< "$states"; then return 0; fi
    sleep 0.5
  done
  fail "the jobs in $home did not end within $limit s: $states"
  return 1
}

if ! up=$(bash "$root/tests/slurm/cluster.sh" up "$cluster"); then
  echo "FAIL: could not start the single-node Slurm" >&2
  exit 1
fi
eval "$up"  # SLURM_CONF
echo "slurm up: $SLURM_CONF"

# 1. Two stages and a baseline.
home="$work/home1"
out=$("$tfw" run "$root/tests/data/tiny-experiment.toml" --executor slurm --cpus-per-task 1 --jobs 2 --home "$home" 2>&1)
rc=$?
echo "$out"
check "submission exits 0 (got $rc)" test "$rc" = 0
check "small goes out as array task 0" contains "$out" "small: training, as Slurm job "
check "the grown stage waits for its parent" contains "$out" "after small succeeds"
check "the summary says submitted" contains "$out" "3 of 3 runs submitted to Slurm"
wait_jobs "$home" 120
jobs=$("$tfw" jobs --slurm --home "$home")
echo "$jobs"
check "three jobs, all COMPLETED" test "$(sql "$home" "SELECT COUNT(*) FROM cluster_jobs WHERE state = 'COMPLETED'")" = 3
check "small and baseline share one array" test "$(sql "$home" "SELECT COUNT(DISTINCT substr(job_id, 1, instr(job_id, '_') - 1)) FROM cluster_jobs WHERE run IN ('small', 'baseline')")" = 1
check "grown is a job of its own" test "$(sql "$home" "SELECT instr(job_id, '_') FROM cluster_jobs WHERE run = 'grown'")" = 0
check "three runs finished" test "$(sql "$home" "SELECT COUNT(*) FROM runs WHERE status = 'finished'")" = 3
check "grown's parent is small" test "$(sql "$home" "SELECT p.name FROM runs c JOIN runs p ON p.id = c.parent_run_id WHERE c.name = 'grown'")" = small
check "grown's cumulative FLOPs include small's" test "$(sql "$home" "SELECT abs(c.cumulative_flops - c.flops - p.flops) < 1 FROM runs c JOIN runs p ON p.id = c.parent_run_id WHERE c.name = 'grown'")" = 1
check "the run's script is kept in its folder" test -s "$home/runs/tiny/grown/slurm-job.sh"
check "the array's script is kept" test -s "$home/experiments/tiny/slurm-array-1.sh"
check "the grown stage's script finds its parent's checkpoint when it runs" grep -q -- "--from-run' 'tiny/small'" "$home/runs/tiny/grown/slurm-job.sh"
again=$("$tfw" run "$root/tests/data/tiny-experiment.toml" --executor slurm --home "$home" 2>&1)
check "running the file again skips the finished runs" contains "$again" "grown: finished before, skipped"
check "and submits nothing" test "$(sql "$home" "SELECT COUNT(*) FROM cluster_jobs")" = 3

# 2. Cancel a running job, then run the file again. long trains 800 steps (about 7 s here; it
#    was 1,500, which its resumption then trained for 13 s): the cancel lands just after its
#    first checkpoint (step 10; it stopped at about step 21), seconds before its end even on
#    a busy machine.
home="$work/home2"
cat > "$work/cancel.toml" << 'EOF'
[experiment]
name = "cancel"
[defaults]
data = { corpus = "kjv" }
train = { batch_size = 8, lr = 3e-3, warmup_steps = 5, eval_every = 100, eval_batches = 2, checkpoint_every = 10, peak_flops = 1e11 }
[runs.long]
family = "tokenformer"
model = { layers = 1, d = 32, heads = 2, n_attn = 32, n_ffn = 64, vocab = 256, seq_len = 32 }
train = { max_steps = 800 }
[runs.longer]
parent = "long"
growth = { method = "pattention_grow" }
family = "tokenformer"
model = { layers = 1, d = 32, heads = 2, n_attn = 48, n_ffn = 96, vocab = 256, seq_len = 32 }
train = { max_steps = 20 }
EOF
out=$("$tfw" run "$work/cancel.toml" --executor slurm --cpus-per-task 2 --home "$home" 2>&1)
check "the cancel experiment is submitted" contains "$out" "2 of 2 runs submitted"
for _ in $(seq 600); do
  ls "$home"/runs/cancel/long/checkpoints/step-*.toml > /dev/null 2>&1 && break
  sleep 0.1
done
out=$("$tfw" cancel --slurm long --home "$home" 2>&1)
echo "$out"
check "tfw cancel --slurm scancels the run's job" contains "$out" "run long of experiment cancel"
wait_jobs "$home" 60
# Slurm calls the job CANCELLED once its script has the signal; the training then finishes
# its step and writes its checkpoint.
for _ in $(seq 200); do
  [ "$(sql "$home" "SELECT status FROM runs WHERE name = 'long'")" != running ] && break
  sleep 0.1
done
check "long is CANCELLED" test "$(sql "$home" "SELECT state FROM cluster_jobs WHERE run = 'long'")" = CANCELLED
check "longer, waiting for it, is CANCELLED too" test "$(sql "$home" "SELECT state FROM cluster_jobs WHERE run = 'longer'")" = CANCELLED
check "long checkpointed on SIGTERM and ended as killed" test "$(sql "$home" "SELECT status FROM runs WHERE name = 'long'")" = killed
stopped_at=$(sql "$home" "SELECT MAX(step) FROM checkpoints c JOIN runs r ON r.id = c.run_id WHERE r.name = 'long'")
out=$(TFW_SLURM_POLL=0.5 "$tfw" run "$work/cancel.toml" --executor slurm --cpus-per-task 2 --home "$home" --wait 2>&1)
rc=$?
echo "$out" | tail -5
check "the resubmitted batch finishes (exit $rc)" test "$rc" = 0
check "only the two cancelled runs were resubmitted" test "$(sql "$home" "SELECT COUNT(*) FROM cluster_jobs")" = 4
check "long resumed from its checkpoint" grep -q "resumed .*step-$(printf %08d "$stopped_at").safetensors at step $stopped_at" "$home/experiments/cancel/long.log"
check "long finished all its steps" test "$(sql "$home" "SELECT COUNT(*) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.name = 'long' AND m.key = 'train/loss'")" = 800
check "longer finished" test "$(sql "$home" "SELECT status FROM runs WHERE name = 'longer'")" = finished

# 3. Two ranks a run, started by srun.
home="$work/home3"
out=$(TFW_SLURM_POLL=0.5 "$tfw" run "$root/tests/data/tiny-experiment.toml" --only baseline --executor slurm --nproc 2 --cpus-per-task 1 --home "$home" --wait 2>&1)
rc=$?
check "the 2-rank run finishes (exit $rc): $out" test "$rc" = 0
check "its script starts the ranks with srun" grep -q "^srun " "$home/runs/tiny/baseline/slurm-job.sh"
check "it trained over 2 ranks" test "$(sql "$home" "SELECT json_extract(final_metrics, '$.world_size') FROM runs WHERE name = 'baseline'")" = 2

# 5. The jobs record to a service that owns the store (--record-to), as on nodes without a
#    safely shared file system: the same experiment, lineage included.
home="$work/home5"
mkdir -p "$home"
"$tfw" serve --listen 127.0.0.1:0 --home "$home" > "$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/serve.log" 2> /dev/null && break; sleep 0.1; done
address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/serve.log" | head -1)
out=$(TFW_SLURM_POLL=0.5 "$tfw" run "$root/tests/data/tiny-experiment.toml" --executor slurm --cpus-per-task 1 --home "$home" --record-to "$address" --wait 2>&1)
rc=$?
check "the batch recording to the service at '$address' finishes (exit $rc): $out" test "$rc" = 0
check "its train steps record to the service" grep -q -- "'--record-to' '$address'" "$home/runs/tiny/grown/slurm-job.sh"
check "the service's store has the three runs, finished" test "$(sql "$home" "SELECT COUNT(*) FROM runs WHERE status = 'finished'")" = 3
check "and the lineage" test "$(sql "$home" "SELECT p.name FROM runs c JOIN runs p ON p.id = c.parent_run_id WHERE c.name = 'grown'")" = small
kill -TERM "$serve_pid"; wait "$serve_pid"

# 4. Bad input.
home="$work/home4"
out=$("$tfw" run "$root/tests/data/tiny-experiment.toml" --executor nosuch --home "$home" 2>&1)
rc=$?
check "an unknown executor exits 2 (got $rc)" test "$rc" = 2
check "and names the choices" contains "$out" "expected local (child processes on this machine) or slurm"
out=$("$tfw" run "$root/tests/data/tiny-experiment.toml" --executor slurm --partition nosuch --home "$home" 2>&1)
rc=$?
echo "$out"
check "a partition sbatch refuses exits 2 (got $rc)" test "$rc" = 2
check "sbatch's own message is passed on" contains "$out" "sbatch refused the job array of 2 runs: sbatch: error: invalid partition specified: nosuch"
check "nothing is recorded" test "$(sql "$home" "SELECT (SELECT COUNT(*) FROM cluster_jobs) + (SELECT COUNT(*) FROM runs)")" = 0
out=$("$tfw" cancel --slurm nosuch --home "$home" 2>&1)
rc=$?
check "cancelling nothing exits 2 (got $rc)" test "$rc" = 2

pids=$(cat "$cluster/slurmctld.pid" "$cluster/slurmd.pid" "$cluster/munge/munged.pid")
bash "$root/tests/slurm/cluster.sh" down "$cluster"
for pid in $pids; do
  if kill -0 "$pid" 2> /dev/null; then fail "daemon pid $pid still runs after cluster.sh down"; fi
done

if [ "$failures" -gt 0 ]; then
  echo "test_slurm: $failures check(s) failed" >&2
  exit 1
fi
echo "test_slurm: all checks passed"
