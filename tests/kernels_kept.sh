#!/usr/bin/env bash
# A resumed run keeps ATen's CPU kernels it started with (issue 51), as it keeps its thread
# count. The golden run (tests/data/golden-tokenformer.toml) trains steps 1-10 with
# `--kernels avx2`, then resumes to step 20 with no choice given: on a processor whose widest
# kernels are AVX-512, ATen would pick those and the losses would move. Its 20 losses must
# equal the golden ones (tests/data/golden-tokenformer.VENDOR.losses, an uninterrupted AVX2 run)
# exactly, both starts must record AVX2, and the resume must say that it kept them. Then
# `--kernels` names what it refuses.
#   bash tests/kernels_kept.sh TFW_BINARY
set -euo pipefail
tfw=${1:?usage: kernels_kept.sh TFW_BINARY}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
  echo "kernels_kept: skipped: this CPU has no AVX2, the kernels the golden numbers were made with"
  exit 77  # ctest: SKIP_RETURN_CODE
fi
source "$root/tests/golden_file.sh"
golden_file_present kernels_kept || exit 1
home=$(mktemp -d /tmp/tfw-kernels.XXXXXX)
trap 'rm -rf "$home"' EXIT
unset ATEN_CPU_CAPABILITY
config="$root/tests/data/golden-tokenformer.toml"
schedule=(--set train.schedule_steps=20 --set train.checkpoint_every=10)
"$tfw" --threads 1 --kernels avx2 train "$config" --home "$home" "${schedule[@]}" --set train.max_steps=10 \
  > "$home/first.out" 2> "$home/first.err" || { cat "$home/first.out" "$home/first.err"; exit 1; }
"$tfw" --threads 1 train --resume golden-tokenformer --home "$home" --set train.max_steps=20 \
  > "$home/second.out" 2> "$home/second.err" || { cat "$home/second.out" "$home/second.err"; exit 1; }
status=0
widest=$(/usr/bin/python3 -c 'import sys; f=open("/proc/cpuinfo").read().split(); print("AVX512" if all(x in f for x in ("avx512vl","avx512bw","avx512dq","fma")) else "AVX2")')
if [ "$widest" = AVX512 ]; then
  if ! grep -q "kernels: ATen's AVX2, as the run recorded" "$home/second.err"; then
    echo "kernels_kept: the resume did not say it kept AVX2; its messages:"; cat "$home/second.err"; status=1
  fi
fi
/usr/bin/python3 - "$home/runs.db" > "$home/losses" << 'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for step, value in db.execute("SELECT step, value FROM metrics WHERE key = 'train/loss' ORDER BY step"):
    print(step, float(value).hex())
kernels = [json.loads(p).get("cpu_capability") for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'provenance' ORDER BY id")]
print("starts", " ".join(str(k) for k in kernels))
PY
if ! grep -q "^starts AVX2 AVX2$" "$home/losses"; then
  echo "kernels_kept: the two starts did not both record AVX2:"; grep starts "$home/losses"; status=1
fi
if diff <(grep -v '^kernels' "$golden_expected") <(grep -v '^starts' "$home/losses"); then
  echo "kernels_kept: the 20 losses, steps 1-10 then resumed 11-20, equal the uninterrupted AVX2 run's exactly"
else
  echo "kernels_kept: the losses differ from ${golden_expected#"$root"/} (above: golden < > resumed)"; status=1
fi
# A name ATen does not have, and kernels the processor lacks, are refused before anything runs.
if out=$("$tfw" --kernels avx9 params "$config" 2>&1); then
  echo "kernels_kept: --kernels avx9 was accepted"; status=1
elif ! grep -q "not a set of ATen's CPU kernels" <<< "$out"; then
  echo "kernels_kept: --kernels avx9 gave: $out"; status=1
fi
if [ "$widest" != AVX512 ]; then
  if out=$("$tfw" --kernels avx512 params "$config" 2>&1); then
    echo "kernels_kept: --kernels avx512 was accepted on a processor without AVX-512"; status=1
  elif ! grep -q "this processor cannot run ATen's AVX512 kernels" <<< "$out"; then
    echo "kernels_kept: --kernels avx512 gave: $out"; status=1
  fi
fi
exit $status
