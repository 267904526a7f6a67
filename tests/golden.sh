#!/usr/bin/env bash
# The golden run (issue 51): tests/data/golden-tokenformer.toml trained on 1 thread with ATen's
# AVX2 kernels; its training losses at steps 1-20, as hex floats, must equal
# tests/data/golden-tokenformer.VENDOR.losses exactly (VENDOR: this CPU's, tests/golden_file.sh),
# and its provenance must name the kernels.
#   bash tests/golden.sh TFW_BINARY            check
#   bash tests/golden.sh TFW_BINARY --write    write this vendor's file anew (a change that
#                                              moves the numbers says so in its commit, and
#                                              writes every vendor's file, each on its CPU)
set -euo pipefail
tfw=${1:?usage: golden.sh TFW_BINARY [--write]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/tests/golden_file.sh"
expected=$golden_expected
if ! grep -qw avx2 /proc/cpuinfo; then
  echo "golden: skipped: this CPU has no AVX2, the kernels the golden numbers were made with"
  exit 77  # ctest: SKIP_RETURN_CODE
fi
if [ "${2:-}" != --write ]; then
  golden_file_present golden || exit 1
  golden_files_agree || exit 1
fi
home=$(mktemp -d /tmp/tfw-golden.XXXXXX)
trap 'rm -rf "$home"' EXIT
ATEN_CPU_CAPABILITY=avx2 "$tfw" --threads 1 train "$root/tests/data/golden-tokenformer.toml" --home "$home" > "$home/log" 2>&1 || { cat "$home/log"; exit 1; }
/usr/bin/python3 - "$home/runs.db" > "$home/losses" << 'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for step, value in db.execute("SELECT step, value FROM metrics WHERE key = 'train/loss' ORDER BY step"):
    print(step, float(value).hex())
payload = db.execute("SELECT payload FROM events WHERE kind = 'provenance'").fetchone()[0]
print("kernels", json.loads(payload).get("cpu_capability"))
PY
if [ "${2:-}" = --write ]; then
  cp "$home/losses" "$expected"
  echo "golden: wrote $expected"
  golden_files_agree || echo "golden: write those files too, each on a CPU of its vendor, before this commit lands"
  exit 0
fi
if diff "$expected" "$home/losses"; then
  echo "golden: the 20 losses equal the committed ones of $golden_vendor exactly"
else
  echo "golden: the losses differ from ${expected#"$root"/} (above: committed < > now)"
  exit 1
fi
