#!/usr/bin/env bash
# Every report in docs/results/ that ships its data is rebuilt from that data, and must match
# the committed file. For each bundle docs/results/data/STEM.tfwb (runs exported
# with `tfw runs export`), `tfw report experiments/mini/STEM.toml --bundle ...` writes the
# report and its figures into a temporary folder; the report must equal the committed
# docs/results/NAME.md but for its "Generated on" line (the date and the command), and every
# figure must equal the committed one byte for byte. A report whose data does not ship must
# say so at its top. Usage: results_rebuild.sh TFW_BINARY
set -u
tfw=${1:?usage: results_rebuild.sh TFW_BINARY}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=$root/docs/results/data
out=$(mktemp -d /tmp/tfw-results-rebuild-XXXXXX)
trap 'rm -rf "$out"' EXIT
status=0 rebuilt=0
shopt -s nullglob
shipped=()
for bundle in "$data"/*.tfwb; do
  stem=$(basename "$bundle" .tfwb)
  experiment=$root/experiments/mini/$stem.toml
  if [ ! -f "$experiment" ]; then
    echo "FAIL: $bundle has no experiment file experiments/mini/$stem.toml"; status=1; continue
  fi
  if ! (cd "$root" && "$tfw" report "experiments/mini/$stem.toml" --bundle "docs/results/data/$stem.tfwb" \
        --out "$out/$stem" > "$out/$stem.log" 2>&1); then
    echo "FAIL: tfw report of $stem:"; sed 's/^/  /' "$out/$stem.log"; status=1; continue
  fi
  for report in "$out/$stem"/*.md; do
    name=$(basename "$report" .md)
    shipped+=("$name")
    committed=$root/docs/results/$name.md
    if [ ! -f "$committed" ]; then
      echo "FAIL: docs/results/$name.md is not committed (rebuilt from $stem.tfwb)"; status=1; continue
    fi
    if ! diff <(grep -v '^Generated on ' "$committed") <(grep -v '^Generated on ' "$report") > "$out/$name.diff"; then
      echo "FAIL: docs/results/$name.md differs from its rebuild from docs/results/data/$stem.tfwb:"
      head -40 "$out/$name.diff" | sed 's/^/  /'; status=1
    fi
    for figure in "$out/$stem/figures/$name"/*; do
      mine=$root/docs/results/figures/$name/$(basename "$figure")
      if ! cmp -s "$figure" "$mine"; then
        echo "FAIL: docs/results/figures/$name/$(basename "$figure") differs from its rebuild (or is missing)"; status=1
      fi
    done
    rebuilt=$((rebuilt + 1))
    echo "ok: docs/results/$name.md and its figures rebuilt from docs/results/data/$stem.tfwb"
  done
done
# An experiment built up in units (experiments/gpu/STEM.toml, one bundle a unit): its bundles
# in docs/results/data/STEM/, read together.
for folder in "$data"/*/; do
  stem=$(basename "$folder")
  units=("$folder"*.tfwb)
  [ ${#units[@]} -gt 0 ] || continue  # a folder of measurements, not of bundles
  experiment=$(ls "$root"/experiments/*/"$stem.toml" 2> /dev/null | head -1)
  if [ -z "$experiment" ]; then
    echo "FAIL: docs/results/data/$stem/ has no experiment file experiments/*/$stem.toml"; status=1; continue
  fi
  args=()
  for bundle in "${units[@]}"; do args+=(--bundle "docs/results/data/$stem/$(basename "$bundle")"); done
  if ! (cd "$root" && "$tfw" report "${experiment#$root/}" "${args[@]}" --out "$out/$stem" > "$out/$stem.log" 2>&1); then
    echo "FAIL: tfw report of $stem:"; sed 's/^/  /' "$out/$stem.log"; status=1; continue
  fi
  for report in "$out/$stem"/*.md; do
    name=$(basename "$report" .md)
    shipped+=("$name")
    if ! diff <(grep -v '^Generated on ' "$root/docs/results/$name.md") <(grep -v '^Generated on ' "$report") \
        > "$out/$name.diff" 2>&1; then
      echo "FAIL: docs/results/$name.md differs from its rebuild from docs/results/data/$stem/:"
      head -40 "$out/$name.diff" | sed 's/^/  /'; status=1
    fi
    for figure in "$out/$stem/figures/$name"/*; do
      cmp -s "$figure" "$root/docs/results/figures/$name/$(basename "$figure")" ||
        { echo "FAIL: docs/results/figures/$name/$(basename "$figure") differs from its rebuild (or is missing)"; status=1; }
    done
    rebuilt=$((rebuilt + 1))
    echo "ok: docs/results/$name.md and its figures rebuilt from the ${#units[@]} bundles of docs/results/data/$stem/"
  done
done
# Every other report says at its top that its data does not ship yet.
for report in "$root"/docs/results/*.md; do
  name=$(basename "$report" .md)
  case "$name" in README|preface|performance|build-and-test|e2-flops-vs-length) continue ;; esac  # measurements, not reports
  if printf '%s\n' "${shipped[@]:-}" | grep -qx "$name"; then continue; fi
  if ! head -5 "$report" | grep -q 'data does not ship yet'; then
    echo "FAIL: docs/results/$name.md neither ships its data (docs/results/data/) nor says so at its top"; status=1
  fi
done
echo "$rebuilt reports rebuilt from shipped data"
exit $status
