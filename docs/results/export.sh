#!/usr/bin/env bash
# Regenerates docs/results/*.md from a TFW_HOME in which the mini experiments were run:
#   for e in e5-ablations e4-growth-methods e3-new-data e1-progressive-scaling; do
#     build/tfw run experiments/mini/$e.toml --home HOME; done
#   bash experiments/mini/e2-flops-vs-length.sh > HOME/e2.out
#   bash docs/results/export.sh HOME
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
home=${1:?usage: export.sh TFW_HOME}
machine="$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sm), LibTorch $("$root/build/tfw" --version | sed 's/.*LibTorch \(.*\))/\1/')"
for e in e1-progressive-scaling e3-new-data e4-growth-methods e5-ablations; do
  file="$root/experiments/mini/$e.toml"
  out="$root/docs/results/$e.md"
  seconds=$(grep -o 'seconds=[0-9]*' "$home/$e.out" 2>/dev/null | tail -1 | cut -d= -f2)
  {
    echo "# $e (mini)"
    echo
    echo "Run on $(date -u +%Y-%m-%d) on $machine, one batch at a time."
    echo "Commands: \`build/tfw run experiments/mini/$e.toml\`, then \`build/tfw export experiments/mini/$e.toml\`."
    [ -n "$seconds" ] && echo "Measured wall time of the batch: $((seconds / 60)) min $((seconds % 60)) s."
    echo "Validation loss is in nats per byte (byte-level data); the paper's numbers are perplexities"
    echo "or accuracies at its own scale (the last column says which): compare trends, not values."
    echo
    "$root/build/tfw" export "$file" --home "$home"
  } > "$out"
  echo "wrote $out"
done
if [ -f "$home/e2.out" ]; then
  {
    echo "# e2-flops-vs-length (mini)"
    echo
    echo "Run on $(date -u +%Y-%m-%d) on $machine. Command: \`bash experiments/mini/e2-flops-vs-length.sh\`."
    echo "Forward FLOPs per sequence and per token from the formulas of TOKENFORMER.md §5, and the"
    echo "forward time per token measured at batch 1 (median of 3) with its achieved GFLOP/s."
    echo
    echo '```'
    cat "$home/e2.out"
    echo '```'
  } > "$root/docs/results/e2-flops-vs-length.md"
  echo "wrote $root/docs/results/e2-flops-vs-length.md"
fi
