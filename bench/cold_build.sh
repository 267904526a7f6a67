#!/usr/bin/env bash
# A cold build, timed: each checkout given is configured into a fresh build folder and built
# with an empty ccache (its own, removed afterwards), one after the other on this machine,
# with the same Python's LibTorch. Prints, for each, the build's wall time (ninja's log, first
# start to last end), the compile seconds summed over all steps, the number of steps, and the
# five targets that cost the most; then a table of them side by side.
#   bash bench/cold_build.sh [--target T] CHECKOUT...
#   bash bench/cold_build.sh /tmp/tfw-before /work/tfw    # e.g. a clone of an older commit, and this one
# TFW_TORCH_PYTHON (default: the first checkout's .venv) provides LibTorch for all of them.
set -euo pipefail
target=()
if [ "${1:-}" = --target ]; then
  target=(--target "$2")
  shift 2
fi
[ $# -ge 1 ] || { echo "usage: bash bench/cold_build.sh [--target T] CHECKOUT..." >&2; exit 2; }
python=${TFW_TORCH_PYTHON:-$(cd "$1" && pwd)/.venv/bin/python}
[ -x "$python" ] || { echo "cold_build: no Python with torch at $python (set TFW_TORCH_PYTHON)" >&2; exit 2; }
echo "cold build on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), LibTorch of $python"
table=()
for checkout in "$@"; do
  checkout=$(cd "$checkout" && pwd)
  build=$(mktemp -d /tmp/tfw-cold-build-XXXXXX)
  cache=$(mktemp -d /tmp/tfw-cold-ccache-XXXXXX)
  commit=$(git -C "$checkout" rev-parse --short=10 HEAD 2>/dev/null || echo "?")
  git -C "$checkout" diff --quiet HEAD 2>/dev/null || commit="$commit+changes"
  echo "== $checkout ($commit): configuring"
  configure_start=$(date +%s.%N)
  CCACHE_DIR=$cache cmake -S "$checkout" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTFW_TORCH_PYTHON="$python" > "$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
  configure=$(awk -v a="$(date +%s.%N)" -v b="$configure_start" 'BEGIN { printf "%.1f", a - b }')
  echo "== building (log: $build.log)"
  start=$(date +%s.%N)
  CCACHE_DIR=$cache CCACHE_BASEDIR=$checkout cmake --build "$build" -j "$(nproc)" ${target[@]+"${target[@]}"} > "$build.log" 2>&1 ||
    { tail -30 "$build.log"; exit 1; }
  wall=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
  read -r steps summed < <(awk 'NR > 1 { n++; s += ($2 - $1) / 1000 } END { printf "%d %.0f\n", n, s }' "$build/.ninja_log")
  echo "   wall ${wall%.*} s (configure ${configure%.*} s), $steps steps, $summed s of compiling and linking summed"
  awk 'NR > 1 { t = $4; sub(/\.dir\/.*/, "", t); n = split(t, p, "/"); s[p[n]] += ($2 - $1) / 1000 }
       END { for (k in s) printf "%.0f %s\n", s[k], k }' "$build/.ninja_log" | sort -rn | head -5 | sed 's/^/     /'
  invalid=$(grep -c "invalid-pch\|Winvalid-pch" "$build.log" || true)
  [ "$invalid" = 0 ] || echo "   warning: $invalid precompiled headers were refused (-Winvalid-pch); see $build.log"
  table+=("| $checkout | $commit | ${wall%.*} | $steps | $summed |")
  rm -rf "$cache"
  echo "   build folder kept: $build"
done
echo
echo "| checkout | commit | cold build wall s | steps | summed s |"
echo "|---|---|---|---|---|"
printf '%s\n' "${table[@]}"
