# Sourced by tests/golden.sh and tests/kernels_kept.sh: the golden losses of this CPU's vendor.
# The golden run's matrix products go through MKL (PyTorch's BLAS on x86), which takes each
# vendor's own code path whatever ATEN_CPU_CAPABILITY says: the same commit's losses differ by
# one float32 ulp between an Intel Xeon and an AMD EPYC (step 8). So each vendor has its file,
# tests/data/golden-tokenformer.VENDOR.losses, and the files must agree with each other within
# 1e-6 (relative; about ten float32 ulps at these losses), so that none drifts from the others
# unseen. A change that moves the numbers writes every vendor's file, each on its CPU: a file
# left as it was fails on its vendor's CPU, and, where the change moved the numbers by more
# than 1e-6, this check fails on every CPU (`--write` names those files).
golden_vendor=$(awk -F': *' '/^vendor_id/ { print $2; exit }' /proc/cpuinfo)
golden_vendor=${golden_vendor:-unknown}
golden_expected="$root/tests/data/golden-tokenformer.$golden_vendor.losses"

# Says why, and returns 1, when this vendor has no file (before anything trains). $1: the
# caller's name, for the message.
golden_file_present() {
  [ -f "$golden_expected" ] && return 0
  echo "$1: no golden losses for this CPU's vendor ($golden_vendor): MKL's matrix products take each vendor's"
  echo "  own code path, so the exact losses are the vendor's. On a commit whose numbers are known good (the"
  echo "  other vendors' files pass on their CPUs), write them: bash tests/golden.sh TFW_BINARY --write"
  return 1
}

# Says why, and returns 1, when the committed vendors' files disagree beyond 1e-6.
golden_files_agree() {
  /usr/bin/python3 - "$root"/tests/data/golden-tokenformer.*.losses << 'PY'
import sys
def losses(path):
    return {int(s): float.fromhex(v) for s, v in (line.split() for line in open(path)) if s.isdigit()}
first, *others = sys.argv[1:]
reference, bad = losses(first), []
for path in others:
    table = losses(path)
    if table.keys() != reference.keys():
        bad.append(f"{path} has steps {sorted(table)}, {first} {sorted(reference)}")
    bad += [f"{path} step {step}: {table[step]!r} against {value!r} in {first}" for step, value in reference.items()
            if step in table and abs(table[step] - value) > 1e-6 * abs(value)]
for line in bad[:5]:
    print(f"golden: {line}: the vendors' files disagree beyond 1e-6")
sys.exit(1 if bad else 0)
PY
}
