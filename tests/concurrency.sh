#!/usr/bin/env bash
# Concurrency (issue 13): 8 trainings on one TFW_HOME at once, beside a service that streams
# one of them to a `tfw watch` client and a reader that lists the store every 0.2 s. Every
# run must finish, no process may report a lock error ("database is locked", "busy"), the
# store must pass SQLite's integrity check, and each run's points in the store must equal
# its metrics.jsonl, point for point (to the 9 digits metrics.jsonl keeps).
#
#   bash tests/concurrency.sh TFW_BINARY [RUNS]
set -euo pipefail
tfw=${1:?usage: concurrency.sh TFW_BINARY [RUNS]}
runs=${2:-8}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d /tmp/tfw-concurrency.XXXXXX)
home="$work/home"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
config="$root/experiments/mini/tiny-train-tokenformer.toml"
"$tfw" data prepare kjv --home "$home" > /dev/null 2>&1

"$tfw" serve --listen 127.0.0.1:0 --home "$home" > "$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q "listening on" "$work/serve.log" && break; sleep 0.1; done
address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/serve.log" | head -1)

(while true; do "$tfw" runs list --home "$home" > /dev/null 2>> "$work/reader.err" || true; sleep 0.2; done) &
pids+=($!)

trainers=()
for i in $(seq 1 "$runs"); do
  "$tfw" --threads 1 train "$config" --home "$home" --name "c$i" --set train.max_steps=60 --set train.seed=$i \
    --set train.eval_every=20 --set train.checkpoint_every=20 > "$work/train-$i.log" 2>&1 &
  trainers+=($!)
done
"$tfw" watch c1 --wait 30 --connect "$address" > "$work/watch.log" 2>&1 &
watcher=$!
failed=0
for p in "${trainers[@]}"; do wait "$p" || failed=$((failed + 1)); done
wait "$watcher" || true

lock_errors=$(cat "$work"/train-*.log "$work/reader.err" "$work/serve.log" "$work/watch.log" | grep -ciE "locked|busy" || true)
finished=$(sqlite3 "$home/runs.db" "SELECT COUNT(*) FROM runs WHERE status = 'finished'")
integrity=$(sqlite3 "$home/runs.db" "PRAGMA integrity_check")
watched=$(grep -c "train/loss" "$work/watch.log" || true)
matches=$(python3 - "$home" "$runs" << 'EOF'
import json, sqlite3, sys
home, runs = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(f"{home}/runs.db")
equal = 0
for i in range(1, runs + 1):
    logged = {}
    for line in open(f"{home}/runs/c{i}/metrics.jsonl"):
        m = json.loads(line)
        logged[(m["key"], m["step"])] = m["value"]
    stored = {(k, s): v for k, s, v in db.execute(
        "SELECT m.key, m.step, m.value FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.name = ?", (f"c{i}",))}
    # metrics.jsonl keeps 9 significant digits: equal to those.
    same = stored.keys() == logged.keys() and all(
        (stored[k] is None and logged[k] is None) or
        (stored[k] is not None and logged[k] is not None and abs(stored[k] - logged[k]) <= 5e-9 * max(abs(logged[k]), 1e-30))
        for k in logged)
    equal += same
print(equal)
EOF
)
echo "concurrency: $runs trainings beside a service, a watcher and a reader: $finished finished, $failed failed, $lock_errors lock errors, integrity $integrity, store equals metrics.jsonl for $matches of $runs runs, watcher saw $watched train/loss points"
[ "$finished" = "$runs" ] && [ "$failed" = 0 ] && [ "$lock_errors" = 0 ] && [ "$integrity" = ok ] && [ "$matches" = "$runs" ]
