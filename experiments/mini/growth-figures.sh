#!/usr/bin/env bash
# Growth figures (docs/growth.md): train a small Tokenformer and a small Transformer on kjv
# for 300 steps, grow them (pattention_grow; net2net and hypercloning) to twice the width
# or tokens, and train 100 more steps. Prints the validation loss before growth, right
# after, and after 100 steps, on the trainer's fixed validation windows. About a minute.
#   bash experiments/mini/growth-figures.sh [TFW_HOME]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tfw="$root/build/tfw"
mini="$root/experiments/mini"
home=${1:-$(mktemp -d)}
mkdir -p "$home"
json() { /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

"$tfw" train "$mini/growth-tokenformer-small.toml" --home "$home" --json 2>/dev/null > "$home/tok.json"
"$tfw" train "$mini/growth-transformer-small.toml" --home "$home" --json 2>/dev/null > "$home/tr.json"
echo "| method | model | parameters | val loss before | right after | max logit diff | after 100 steps |"
echo "|---|---|---|---|---|---|---|"
for method in pattention_grow net2net hypercloning; do
  if [ "$method" = pattention_grow ]; then small=tok; large=growth-tokenformer-large; family=Tokenformer
  else small=tr; large=growth-transformer-large; family=Transformer; fi
  checkpoint=$(json '["last_checkpoint"]' < "$home/$small.json")
  "$tfw" grow --method "$method" --from "$checkpoint" --to "$mini/$large.toml" --out "$home/grown-$method" \
         --check --json --home "$home" > "$home/grow-$method.json"
  grown=$(json '["checkpoint"]' < "$home/grow-$method.json")
  "$tfw" train "$mini/$large.toml" --init-from "$grown" --name "grown-$method" --home "$home" --json \
         2>/dev/null > "$home/after-$method.json"
  printf "| %s | %s | %s -> %s | %.4f | %.4f | %.2e | %.4f |\n" "$method" "$family" \
    "$(json '["parameters_before"]' < "$home/grow-$method.json")" "$(json '["parameters_after"]' < "$home/grow-$method.json")" \
    "$(json '["loss_before"]' < "$home/grow-$method.json")" "$(json '["loss_after"]' < "$home/grow-$method.json")" \
    "$(json '["max_abs_logit_diff"]' < "$home/grow-$method.json")" "$(json '["val_loss"]' < "$home/after-$method.json")"
done
