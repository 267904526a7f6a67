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

# Prints why, and returns 1, when the committed vendors' files disagree beyond 1e-6.
golden_files_agree() {
  /usr/bin/python3 - "$root"/tests/data/golden-tokenformer.*.losses << 'PY'
import sys
def losses(path):
    return {int(s): float.fromhex(v) for s, v in (line.split() for line in open(path)) if s.isdigit()}
files = {path: losses(path) for path in sys.argv[1:]}
first, reference = next(iter(files.items()))
bad = [(path, step, value, reference.get(step)) for path, table in files.items() for step, value in table.items()
       if reference.get(step) is None or abs(value - reference[step]) > 1e-6 * abs(reference[step]) or table.keys() != reference.keys()]
for path, step, value, other in bad[:5]:
    print(f"golden: {path} step {step}: {value!r} against {other!r} in {first}: the vendors' files disagree beyond 1e-6")
sys.exit(1 if bad else 0)
PY
}
