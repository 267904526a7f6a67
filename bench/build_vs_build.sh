#!/usr/bin/env bash
# Training throughput of two tfw builds side by side: the same config, seed, steps and
# threads, interleaved rounds in one run (A then B in each round), so that the machine's drift
# between rounds cancels in each round's own ratio. Made for issue 32's LibTorch upgrade:
# today's build (B, LibTorch 2.x from the venv) against a build of the old main with Debian's
# LibTorch 1.13 (A), fp32, on the two quickstart configs.
# Figures: the median over rounds of each build's tokens/s (training tokens over step time,
# docs/cli.md; evaluation and checkpoints are off), and the median of the rounds' B/A ratios.
#   TFW_A=/path/to/old/tfw [TFW_B=build/tfw] bash bench/build_vs_build.sh [CONFIG...]
#   ROUNDS=5 STEPS=60 environment knobs
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/common.sh"
a=${TFW_A:?set TFW_A to the baseline tfw binary}
b=${TFW_B:-$root/build/tfw}
bench_setup 5 60 "$@"
echo "A: $("$a" --version)"
echo "B: $("$b" --version)"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $steps steps fp32, median of $rounds interleaved rounds"
printf "%-28s %12s %12s %8s %16s\n" config "A tok/s" "B tok/s" "B/A" "B/A range"
for config in "${configs[@]}"; do
  rates_a=(); rates_b=(); ratios=()
  for round in $(seq "$rounds"); do
    for side in a b; do
      bin=$a; [ "$side" = b ] && bin=$b
      # Separate homes: the two builds' stores need not share a schema version.
      out=$(TFW_FIXED_THREADS=1 "$bin" train "$config" --home "$home/$side" --name "bench-$round-$(basename "$config" .toml)" \
            --json --set train.max_steps="$steps" --set train.eval_every=1000000 --set train.checkpoint_every=1000000 \
            --set train.max_tokens=0 --set train.max_flops=0 --set train.precision='"fp32"' 2>/dev/null)
      rate=$(echo "$out" | json_field tokens_per_second)
      if [ "$side" = a ]; then rates_a+=("$rate"); else rates_b+=("$rate"); fi
    done
    ratios+=("$(awk -v x="${rates_a[-1]}" -v y="${rates_b[-1]}" 'BEGIN { print y / x }')")
  done
  lo=$(printf "%s\n" "${ratios[@]}" | sort -g | head -1); hi=$(printf "%s\n" "${ratios[@]}" | sort -g | tail -1)
  awk -v name="$(basename "$config" .toml)" -v x="$(median "${rates_a[@]}")" -v y="$(median "${rates_b[@]}")" \
      -v r="$(median "${ratios[@]}")" -v lo="$lo" -v hi="$hi" \
    'BEGIN { printf "%-28s %12.0f %12.0f %7.3fx %7.3f-%.3fx\n", name, x, y, r, lo, hi }'
done
