#!/usr/bin/env bash
# Data-parallel training on this machine: 2 ranks of 1 thread (tfw train --nproc 2) against
# 1 rank of 2 threads, the same config, global batch and steps, interleaved rounds in one run;
# and the Gloo all-reduce's cost by message size (build/bench/bench_allreduce on 2 ranks).
#   tokens/s       the training's own figure: training tokens over step time (docs/cli.md),
#                  median over rounds; step time includes averaging the gradients
#   all-reduce/step the run's comm_seconds over its steps (the gradients' all-reduce and the
#                  loss's), median over rounds
#   bash bench/data_parallel.sh [CONFIG...]   (default: the quickstart Tokenformer and Transformer)
#   ROUNDS=3 STEPS=100 environment knobs
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/common.sh"
allreduce=${BENCH_ALLREDUCE:-$root/build/bench/bench_allreduce}
bench_setup 3 100 "$@"

echo "== Gloo all-reduce, 2 ranks on 127.0.0.1, float32 (median per call)"
port=$(/usr/bin/python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
RANK=1 "$allreduce" > /dev/null & other=$!
RANK=0 "$allreduce" > "$home/allreduce.jsonl"
wait $other
unset WORLD_SIZE MASTER_ADDR MASTER_PORT
/usr/bin/python3 - "$home/allreduce.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'bytes':>10} {'median':>11} {'algbw GB/s':>11} {'busbw GB/s':>11}")
for r in rows:
    print(f"{r['bytes']:>10} {r['median_seconds']*1e3:>9.3f} ms {r['algbw_GBps']:>11.2f} {r['busbw_GBps']:>11.2f}")
# t = alpha + bytes / beta, least squares over the sizes
n = len(rows); xs = [r['bytes'] for r in rows]; ys = [r['median_seconds'] for r in rows]
mx = sum(xs) / n; my = sum(ys) / n
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
alpha = my - slope * mx
print(f"fit t = alpha + bytes/beta: alpha = {alpha*1e6:.1f} us, beta = {1/slope/1e9:.2f} GB/s")
PY

echo
echo "== training: 1 rank x 2 threads against 2 ranks x 1 thread, $steps steps, median of $rounds rounds"
printf "%-26s %12s %12s %7s %16s %10s\n" config "1 rank tok/s" "2 rank tok/s" ratio "all-reduce/step" "share"
for config in "${configs[@]}"; do
  declare -A rates=() comm=() step=()
  for round in $(seq "$rounds"); do
    for n in 1 2; do
      out=$(TFW_FIXED_THREADS=1 "$tfw" train "$config" --home "$home" --name "np$n-$round-$(basename "$config" .toml)" \
            --nproc "$n" --json --set train.max_steps="$steps" --set train.max_tokens=0 --set train.max_flops=0 \
            --set train.eval_every=1000000 --set train.checkpoint_every=1000000 2>/dev/null)
      rates[$n]+="$(echo "$out" | json_field tokens_per_second) "
      comm[$n]+="$(echo "$out" | json_field comm_seconds) "
      step[$n]+="$(echo "$out" | json_field time | /usr/bin/python3 -c "import ast,sys; print(ast.literal_eval(sys.stdin.read())['step'])") "
    done
  done
  r1=$(median ${rates[1]}); r2=$(median ${rates[2]}); c2=$(median ${comm[2]}); s2=$(median ${step[2]})
  awk -v name="$(basename "$config" .toml)" -v r1="$r1" -v r2="$r2" -v c="$c2" -v s="$s2" -v steps="$steps" \
    'BEGIN { printf "%-26s %12.0f %12.0f %6.2fx %13.2f ms %9.1f%%\n", name, r1, r2, r2 / r1, 1e3 * c / steps, 100 * c / s }'
  unset rates comm step
done
