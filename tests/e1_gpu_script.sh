#!/usr/bin/env bash
# scripts/e1-gpu on this machine, which needs no GPU for it: with the CPU twin
# (experiments/gpu/e1-bpe-twin.toml), a unit (--unit) runs in a home and is exported as a bundle
# that imports into a fresh home, with its row in the table printed last; a second call does not
# run a finished unit again, and with too little of --seconds left no unit starts; with the GPU
# file, the corpus is prepared from this Python's PyTorch and its shards' SHA-256 equals
# experiments/gpu/e1-bpe-corpus.sha256, and without a CUDA device the script stops before the
# units, saying so. Usage: e1_gpu_script.sh TFW_BINARY PYTHON
set -u
tfw=${1:?usage: e1_gpu_script.sh TFW_BINARY PYTHON}
python=${2:?usage: e1_gpu_script.sh TFW_BINARY PYTHON}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d /tmp/tfw-e1-gpu-script-XXXXXX)
trap 'rm -rf "$work"' EXIT
status=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; status=1; fi; }

# The twin: ladder-s0 alone (--unit; it takes about 5 s here, more on a busy machine), the unit
# the checks below read. (It was every unit that fit in 45 s: two more, 11 s, that nothing read;
# a budget of 36 s would have run ladder-s0 alone only by a margin of seconds.)
E1_HOME=$work/home TFW=$tfw TFW_TORCH_PYTHON=$python E1_UNMEASURED_SECONDS=10 \
  bash "$root/scripts/e1-gpu" --out "$work/out" --experiment "$root/experiments/gpu/e1-bpe-twin.toml" \
  --unit ladder-s0 --seconds 60 > "$work/twin.txt" 2> "$work/twin.err"
code=$?
check "the twin's run exits 0 (got $code)" '[ $code -eq 0 ]'
check "the table ends the output" 'tail -3 "$work/twin.txt" | grep -q "^Total: "'
check "ladder-s0 ran whole: 3 runs, 3 finished" 'grep -q "^| ladder-s0 | 3 | 3 | " "$work/twin.txt"'
check "its bundle was written" '[ -s "$work/out/ladder-s0.tfwb" ]'
check "the corpus step is the GPU file's alone" '! grep -q "corpus" "$work/twin.txt"'
check "the bundles line names the bundle" 'grep -q "^Bundles: .*ladder-s0.tfwb" "$work/twin.txt"'
"$tfw" runs import "$work/out/ladder-s0.tfwb" --home "$work/fresh" > /dev/null 2>&1
listed=$("$tfw" runs list --experiment e1-gpu-twin --json --home "$work/fresh" 2> /dev/null |
  "$python" -c 'import json, sys; print(" ".join(sorted(r["name"] for r in json.load(sys.stdin)["runs"])))')
check "the bundle imports into a fresh home with the ladder's three runs ($listed)" \
  '[ "$listed" = "tokenformer-s1-s0 tokenformer-s2-s0 tokenformer-s3-s0" ]'
# Run again in the same home: the finished units are not run twice.
E1_HOME=$work/home TFW=$tfw TFW_TORCH_PYTHON=$python E1_UNMEASURED_SECONDS=10 \
  bash "$root/scripts/e1-gpu" --out "$work/out2" --experiment "$root/experiments/gpu/e1-bpe-twin.toml" --seconds 12 \
  > "$work/twin2.txt" 2> /dev/null
check "a second call does not run ladder-s0 again" '! grep -q "^| ladder-s0 " "$work/twin2.txt"'
# With too little time for any unit: nothing runs, and no bundle is named.
E1_HOME=$work/home3 TFW=$tfw TFW_TORCH_PYTHON=$python E1_UNMEASURED_SECONDS=600 \
  bash "$root/scripts/e1-gpu" --out "$work/out3" --experiment "$root/experiments/gpu/e1-bpe-twin.toml" --seconds 5 \
  > "$work/twin3.txt" 2> /dev/null
check "with 5 s no unit starts and no bundle is named" 'grep -q "^| ladder-s0 | - | not started " "$work/twin3.txt" && grep -q "^Bundles: none.$" "$work/twin3.txt"'

# The GPU file: the corpus, then no CUDA device (or, on a GPU machine, the units: not here).
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
  E1_HOME=$work/gpu-home TFW=$tfw TFW_TORCH_PYTHON=$python \
    bash "$root/scripts/e1-gpu" --out "$work/gpu" --seconds 60 > "$work/gpu.txt" 2> /dev/null
  code=$?
  check "the GPU file's run exits 0 without a GPU (got $code)" '[ $code -eq 0 ]'
  check "its corpus has the recorded SHA-256" 'grep -q "^- corpus pytorch-py: 17821789 training and 937157 validation tokens, SHA-256 as" "$work/gpu.txt"'
  check "it stops before the units, saying so" 'grep -q "^No CUDA device: stopped before the units" "$work/gpu.txt"'
fi
[ $status -eq 0 ] || { echo "--- the twin's output"; cat "$work/twin.txt" "$work/twin.err" | tail -40; }
exit $status
