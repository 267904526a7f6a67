#!/usr/bin/env bash
# Training throughput of `tfw train` against an independent Python implementation of the
# same model on the venv's PyTorch (bench/python_train_step.py, TFW_PYTHON to change it): same config, batch,
# sequence length and threads, interleaved rounds in one run. Prints the medians of tokens/s,
# the median of the rounds' ratios (each round runs the two back to back, so a ratio compares
# like with like even when the machine's speed drifts between rounds: on this shared machine
# it does, by up to 1.5x) and MFU two ways. tfw measures the machine's float32 matmul peak
# (engine/machine/peak.cpp) the first time a home needs it; here every round measures it afresh,
# just before its training, so that "MFU (round)" is a training's FLOP/s over the peak of the
# same moment (median over rounds), and "MFU (best)" is the median FLOP/s over the highest
# peak any round measured: the conservative figure.
#   bash bench/train_vs_python.sh [CONFIG...]   (default: the two quickstart configs)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/bench/common.sh"
bench_setup 3 30 "$@"
printf "%-28s %12s %12s %8s %11s %10s %15s\n" config "tfw tok/s" "python tok/s" ratio "MFU (round)" "MFU (best)" "round range"
for config in "${configs[@]}"; do
  tfw_rates=(); py_rates=(); mfus=(); ratios=(); achieved=(); peaks=()
  for round in $(seq "$rounds"); do
    rm -f "$home/machine.toml"  # the peak of this moment
    out=$(TFW_FIXED_THREADS=1 "$tfw" train "$config" --home "$home" --name "bench-$round-$(basename "$config" .toml)" --json \
          --set train.max_steps="$steps" --set train.eval_every=1000000 --set train.checkpoint_every=1000000 \
          --set train.max_tokens=0 --set train.max_flops=0 2>/dev/null)
    tfw_rates+=("$(echo "$out" | json_field tokens_per_second)")
    mfus+=("$(echo "$out" | json_field mfu)")
    peaks+=("$(echo "$out" | json_field peak_flops)")
    achieved+=("$(awk -v m="${mfus[-1]}" -v p="${peaks[-1]}" 'BEGIN { print m * p }')")
    py_rates+=("$("${TFW_PYTHON:-$root/.venv/bin/python}" "$root/bench/python_train_step.py" "$config" --steps "$steps" --threads "$(nproc)" \
                 | json_field tokens_per_second)")
    ratios+=("$(awk -v t="${tfw_rates[-1]}" -v p="${py_rates[-1]}" 'BEGIN { print t / p }')")
  done
  t=$(median "${tfw_rates[@]}"); p=$(median "${py_rates[@]}"); m=$(median "${mfus[@]}"); r=$(median "${ratios[@]}")
  lo=$(printf "%s\n" "${mfus[@]}" | sort -g | head -1); hi=$(printf "%s\n" "${mfus[@]}" | sort -g | tail -1)
  a=$(median "${achieved[@]}"); best=$(printf "%s\n" "${peaks[@]}" | sort -g | tail -1)
  awk -v name="$(basename "$config" .toml)" -v t="$t" -v p="$p" -v m="$m" -v r="$r" -v lo="$lo" -v hi="$hi" \
      -v a="$a" -v best="$best" \
    'BEGIN { printf "%-28s %12.0f %12.0f %8.3f %10.1f%% %9.1f%% %6.1f-%5.1f%%\n", name, t, p, r, 100 * m, 100 * a / best,
             100 * lo, 100 * hi }'
done
