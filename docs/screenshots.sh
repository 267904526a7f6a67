#!/usr/bin/env bash
# Regenerates docs/images/gui-*.png: every GUI view rendered headless (tfw gui --screenshot)
# under Xvfb from a store. The README's and docs/gui.md's pictures come from the store of
# the mini experiments (docs/results/export.sh lists the runs):
#   bash docs/screenshots.sh TFW_HOME
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
home=${1:?usage: bash docs/screenshots.sh TFW_HOME}
tfw="$root/build/tfw"
images="$root/docs/images"
mkdir -p "$images"
shot() {  # shot NAME ARGS...
  local name=$1; shift
  xvfb-run -a -s "-screen 0 1600x1000x24" "$tfw" gui --home "$home" --screenshot "$images/gui-$name.png" "$@"
  echo "wrote $images/gui-$name.png"
}
# The e1-mini ladder (a Tokenformer grown twice, three seeds: one lineage, one colour) against
# Tokenformers and Transformers from scratch at the full budgets.
ids() {  # ids NAME-PATTERN: the e1-mini runs whose names match the regular expression
  "$tfw" runs list --home "$home" --experiment e1-mini --json | python3 -c \
    'import json,re,sys; print(",".join(str(r["id"]) for r in json.load(sys.stdin)["runs"] if re.fullmatch(sys.argv[1], r["name"])))' "$1"
}
e1=$(ids 'tokenformer-s[123]-s[0-9]+|(tokenformer|transformer)-s[23]-full-s[0-9]+')
grown=$(ids 'tokenformer-s3-s0')
shot runs --view runs --select "$e1"
shot curves --view curves --select "$e1" --x cumulative_flops --smoothing 0.9 --metric train/loss
shot flops --view flops
shot attention --view attention --select "$grown" --layer 1 --proj ffn --token 100 \
  --text "In the beginning God created the heaven and the earth."
shot designer --view designer
