#!/usr/bin/env bash
# Regenerates docs/results/ from a TFW_HOME in which the mini experiments were run, and ships
# their runs as bundles in docs/results/data/:
#   for e in e3-new-data e4-growth-methods e5-ablations e1-progressive-scaling e6-expressiveness \
#            e7-online-growth e7-masking e8-vision; do
#     build/tfw run experiments/mini/$e.toml --home HOME; done
#   bash docs/results/export.sh HOME [EXPERIMENT...]   # default: every batch above
# Writes, with `tfw report`, one claims report per experiment (NAME.md, figures/NAME/) and
# README.md (preface.md, then every claim with its verdict); and E2's figure (its table with
# E2_MEASURE=1, on an idle machine: it times the forward pass).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
home=${1:?usage: export.sh TFW_HOME [EXPERIMENT...]}
shift
experiments=("$@")
[ ${#experiments[@]} -eq 0 ] && experiments=(e1-progressive-scaling e3-new-data e4-growth-methods e5-ablations
  e6-expressiveness e7-online-growth e7-masking e8-vision)
cd "$root"
files=()
for e in "${experiments[@]}"; do files+=("experiments/mini/$e.toml"); done
# The data first (issue 34): each experiment's stopped runs as a bundle in docs/results/data/,
# so that every number below can be rebuilt from what ships (tests/results_rebuild.sh).
mkdir -p docs/results/data
for e in "${experiments[@]}"; do
  name=$(sed -n '/^\[experiment\]/,/^\[/s/^name *= *"\(.*\)"/\1/p' "experiments/mini/$e.toml" | head -1)
  build/tfw runs export --experiment "$name" --out "docs/results/data/$e.tfwb" --home "$home"
done
build/tfw report "${files[@]}" --home "$home" --out docs/results --preface docs/results/preface.md
build/tfw export experiments/mini/e2-flops-vs-length.toml --home "$home" --figures docs/results/figures/e2-mini 2>&1 |
  grep -v '^no runs'
# The E2 table measures time per token: only on an idle machine, when asked (E2_MEASURE=1).
if [ "${E2_MEASURE:-0}" = 1 ]; then
  machine="$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), LibTorch $(build/tfw --version | sed 's/.*LibTorch \(.*\))/\1/')"
  {
    echo "# e2-flops-vs-length (mini)"
    echo
    echo "Run on $(date -u +%Y-%m-%d) on $machine. Commands: \`bash experiments/mini/e2-flops-vs-length.sh\` (the table),"
    echo "\`build/tfw export experiments/mini/e2-flops-vs-length.toml --figures docs/results/figures/e2-mini\` (the figure)."
    echo "Forward FLOPs per sequence and per token from the families' formulas (docs/plugins.md), and the"
    echo "forward time per token measured at batch 1 (median of 3) with its achieved GFLOP/s."
    echo
    echo "![FLOPs against length](figures/e2-mini/flops_vs_length.svg)"
    echo
    echo '```'
    bash experiments/mini/e2-flops-vs-length.sh
    echo '```'
  } > docs/results/e2-flops-vs-length.md
  echo "wrote docs/results/e2-flops-vs-length.md"
fi
