# Sourced by tests/golden.sh and tests/kernels_kept.sh: the golden losses of this CPU's vendor.
# The golden run's matrix products go through MKL (PyTorch's BLAS on x86), which takes each
# vendor's own code path whatever ATEN_CPU_CAPABILITY says: the same commit's losses differ by
# one float32 ulp between an Intel Xeon and an AMD EPYC (step 8). So each vendor has its file,
# tests/data/golden-tokenformer.VENDOR.losses, and the files must agree with each other within
# 1e-6 (relative), a few ulps, so that none drifts from the others unseen.
golden_vendor=$(sed -n 's/^vendor_id[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1)
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
