#!/usr/bin/env bash
# Crash safety: SIGKILL a training at up to KILLS random moments (checkpoints every 2 steps,
# so many kills land in checkpoint writes and store commits; fewer when the training finishes
# first, and at least half of KILLS must land in a live training), resume it each time,
# and check after every kill that the store passes SQLite's integrity check; at the end the
# run's losses must equal an uninterrupted run's, step for step (exactly), and the store's
# points must equal metrics.jsonl's, point for point (to the 9 digits metrics.jsonl keeps).
#
#   bash tests/crash_safety.sh TFW_BINARY [KILLS] [SEED]
set -euo pipefail
tfw=${1:?usage: crash_safety.sh TFW_BINARY [KILLS] [SEED]}
kills=${2:-20}
seed=${3:-13}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d /tmp/tfw-crash-safety.XXXXXX)
trap 'rm -rf "$work"' EXIT
config="$root/experiments/mini/tiny-train-tokenformer.toml"
steps=500
common=(--set train.max_steps=$steps --set train.checkpoint_every=2 --set train.eval_every=50 --set train.keep_checkpoints=3)
export TFW_HEARTBEAT_TIMEOUT=1
RANDOM=$seed

"$tfw" --threads 1 train "$config" --home "$work/reference" --name r "${common[@]}" > /dev/null 2>&1
"$tfw" --threads 1 data prepare kjv --home "$work/crashed" > /dev/null 2>&1

# A quick machine can finish the steps before the last kill: then the kills stop there (a
# resume of a finished run trains nothing and exits 2), and the checks below hold as they are.
status_of() { sqlite3 "$work/crashed/runs.db" "SELECT status FROM runs" 2> /dev/null || true; }
killed=0 integrity=0 started=0 rounds=0
for ((i = 1; i <= kills; i++)); do
  [ "$(status_of)" = finished ] && break
  rounds=$((rounds + 1))
  if [ "$started" = 0 ]; then
    "$tfw" --threads 1 train "$config" --home "$work/crashed" --name r "${common[@]}" > "$work/log" 2>&1 &
  else
    "$tfw" --threads 1 train --resume r --home "$work/crashed" > "$work/log" 2>&1 &
  fi
  pid=$!
  # 0.4 to 2.2 s: past start-up (about 0.4 s), into the steps and their checkpoints. About
  # 30 steps a round here, so 20 rounds take most of the 500 steps. (It was 0.4 to 3.2 s and
  # 800 steps: the same kills, 17 s more of the suite.)
  sleep "0.$((RANDOM % 10 + 4))"
  sleep "0.$((RANDOM % 10))"
  if kill -KILL "$pid" 2> /dev/null; then killed=$((killed + 1)); fi
  wait "$pid" 2> /dev/null || true
  ls "$work/crashed/runs/r/checkpoints/"step-*.toml > /dev/null 2>&1 && started=1
  if [ "$(sqlite3 "$work/crashed/runs.db" 'PRAGMA integrity_check')" = ok ]; then integrity=$((integrity + 1)); fi
done
if [ "$(status_of)" != finished ]; then
  sleep 1.2  # the last kill's heartbeat goes stale: the run shows as crashed, and resumes
  if [ "$started" = 0 ]; then
    "$tfw" --threads 1 train "$config" --home "$work/crashed" --name r "${common[@]}" > "$work/log" 2>&1
  else
    "$tfw" --threads 1 train --resume r --home "$work/crashed" > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
  fi
fi

query="SELECT step, value FROM metrics WHERE key = 'train/loss' ORDER BY step"
reference=$(sqlite3 "$work/reference/runs.db" "$query")
crashed=$(sqlite3 "$work/crashed/runs.db" "$query")
status=$(sqlite3 "$work/crashed/runs.db" "SELECT status FROM runs")
jsonl=$(python3 - "$work/crashed/runs/r/metrics.jsonl" "$work/crashed/runs.db" << 'EOF'
import json, sqlite3, sys
# metrics.jsonl holds every attempt's lines; the last line of each (key, step) is the one kept.
logged = {}
for line in open(sys.argv[1]):
    m = json.loads(line)
    logged[(m["key"], m["step"])] = m["value"]
stored = {(k, s): v for k, s, v in sqlite3.connect(sys.argv[2]).execute("SELECT key, step, value FROM metrics")}
# metrics.jsonl keeps 9 significant digits: equal to those.
def same_value(a, b):
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 5e-9 * max(abs(a), abs(b), 1e-30))
same = sum(1 for k in logged if k in stored and same_value(stored[k], logged[k]))
print(f"{same} {len(logged)} {len(stored)}")
EOF
)
read -r same logged stored <<< "$jsonl"
equal=$([ "$reference" = "$crashed" ] && echo yes || echo no)
echo "crash safety: $killed kills in $rounds rounds, $integrity/$rounds integrity checks ok, final status $status, losses equal to an uninterrupted run: $equal ($(echo "$crashed" | wc -l) steps), store points equal to metrics.jsonl: $same of $logged (store holds $stored)"
[ "$integrity" = "$rounds" ] && [ "$killed" -ge $((kills / 2)) ] && [ "$status" = finished ] && [ "$equal" = yes ] && [ "$same" = "$logged" ] && [ "$stored" = "$logged" ]
