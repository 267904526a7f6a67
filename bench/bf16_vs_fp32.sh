#!/usr/bin/env bash
# Training in bf16 (train.precision = "bf16": autocast matmuls, fp32 master weights) against
# fp32, on the quickstart configs: the same run (seed, data, steps) in both precisions,
# interleaved rounds in one run. Throughput is the median over rounds of the training's own
# tokens/s (training tokens over step time, docs/cli.md), the speedup the median of the
# rounds' own ratios (each round runs both back to back, so the machine's drift between
# rounds cancels); the validation loss is the run's
# final one (20 fixed batches), the same in every round for a precision, so it is printed once.
#   bash bench/bf16_vs_fp32.sh [CONFIG...]   (default: the two quickstart configs)
#   ROUNDS=3 STEPS=300 environment knobs
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/common.sh"
bench_setup 3 300 "$@"


echo "$steps steps, $(nproc) threads, median of $rounds rounds; val loss after the last step"
printf "%-26s %11s %11s %7s %10s %10s %9s\n" config "fp32 tok/s" "bf16 tok/s" speedup "fp32 val" "bf16 val" "val diff"
for config in "${configs[@]}"; do
  declare -A rates=() val=() now=(); speedups=()
  for round in $(seq "$rounds"); do
    for precision in fp32 bf16; do
      out=$(TFW_FIXED_THREADS=1 "$tfw" train "$config" --home "$home" --name "$precision-$round-$(basename "$config" .toml)" \
            --json --set train.max_steps="$steps" --set train.max_tokens=0 --set train.max_flops=0 \
            --set train.eval_every=1000000 --set train.checkpoint_every=1000000 \
            --set train.precision="\"$precision\"" 2>/dev/null)
      now[$precision]=$(echo "$out" | json_field tokens_per_second)
      rates[$precision]+="${now[$precision]} "
      val[$precision]=$(echo "$out" | json_field val_loss)
    done
    speedups+=("$(awk -v f="${now[fp32]}" -v b="${now[bf16]}" 'BEGIN { print b / f }')")
  done
  f=$(median ${rates[fp32]}); b=$(median ${rates[bf16]}); x=$(median "${speedups[@]}")
  awk -v name="$(basename "$config" .toml)" -v f="$f" -v b="$b" -v x="$x" -v vf="${val[fp32]}" -v vb="${val[bf16]}" \
    'BEGIN { d = (vb - vf) / vf; printf "%-26s %11.0f %11.0f %6.2fx %10.4f %10.4f %+8.2f%%\n", name, f, b, x, vf, vb, 100 * d }'
  unset rates val now
done
