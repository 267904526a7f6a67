#!/usr/bin/env bash
# How much a training slows down beside a competing busy process, three ways (engine/machine/cpu_load.h):
#   default   tfw's default since issue 34: a fixed thread count; `tfw train` makes OpenMP's
#             threads sleep at barriers (OMP_WAIT_POLICY=PASSIVE) when other processes are
#             busy as it starts, and leaves libgomp's spin-then-sleep otherwise; the same
#             numbers for the same seed whatever the load
#   passive   a fixed count, always passive (OMP_WAIT_POLICY=PASSIVE)
#   adaptive  TFW_ADAPT_THREADS=1: the ThreadGovernor lowers torch's threads to the cores
#             other processes leave free (the default of issues 16 to 33); faster beside
#             other work, but the arithmetic changes with the load
#   spinning  a fixed count with libgomp's own wait policy (spin, then sleep: the behaviour
#             before issue 16; OMP_WAIT_POLICY set empty, so tfw leaves it alone)
# Each round trains the same config idle and then beside one busy loop (a shell `while :`,
# one core's worth of load), for each mode, interleaved. Figures are medians over rounds of
# the training's own tokens/s (training tokens over step time, docs/cli.md) and of the
# command's wall time (start-up, data preparation, evaluation and checkpoints included).
#   bash bench/busy_machine.sh [CONFIG]   (default: the README's tiny training, 100 steps)
#   ROUNDS=3 STEPS=100 THREADS=2 environment knobs
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/common.sh"
bench_setup 3 100 "${1:-$root/experiments/mini/tiny-train-tokenformer.toml}"
threads=${THREADS:-$(nproc)}
config=${configs[0]}
busy_pid=
cleanup() { [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null; rm -rf "$home"; }
trap cleanup EXIT

train() {  # mode -> "tokens/s wall"
  local mode=$1 name="r$RANDOM$RANDOM" start end out
  local -a env=()
  case "$mode" in
    passive) env=(OMP_WAIT_POLICY=PASSIVE) ;;
    adaptive) env=(TFW_ADAPT_THREADS=1) ;;
    spinning) env=(OMP_WAIT_POLICY=) ;;
  esac
  start=$(date +%s.%N)
  out=$(env "${env[@]}" "$tfw" --threads "$threads" train "$config" --home "$home" --name "$name" --json \
        --set train.max_steps="$steps" --set train.checkpoint_every=1000000 2>/dev/null)
  end=$(date +%s.%N)
  echo "$(echo "$out" | json_field tokens_per_second) \
$(echo "$end - $start" | bc -l)"
}

declare -A rate wall
for round in $(seq "$rounds"); do
  for policy in default passive adaptive spinning; do
    read -r r w < <(train "$policy"); rate[$policy,idle]+="$r "; wall[$policy,idle]+="$w "
    (while :; do :; done) &
    busy_pid=$!
    read -r r w < <(train "$policy"); rate[$policy,busy]+="$r "; wall[$policy,busy]+="$w "
    kill "$busy_pid"; wait "$busy_pid" 2>/dev/null || true; busy_pid=
  done
done

echo "$(basename "$config" .toml): $steps steps, $threads threads, $(nproc) cores, one busy process beside, median of $rounds rounds"
printf "%-9s %12s %12s %9s %10s %10s %9s\n" mode "idle tok/s" "busy tok/s" slowdown "idle wall" "busy wall" slowdown
for policy in default passive adaptive spinning; do
  ri=$(median ${rate[$policy,idle]}); rb=$(median ${rate[$policy,busy]})
  wi=$(median ${wall[$policy,idle]}); wb=$(median ${wall[$policy,busy]})
  awk -v p="$policy" -v ri="$ri" -v rb="$rb" -v wi="$wi" -v wb="$wb" \
    'BEGIN { printf "%-9s %12.0f %12.0f %8.2fx %9.2fs %9.2fs %8.2fx\n", p, ri, rb, ri / rb, wi, wb, wb / wi }'
done
