#!/usr/bin/env bash
# The parsers of outside bytes under libFuzzer with AddressSanitizer and UBSan (issue 33):
# builds each target with clang, then runs it over its seed corpus (the hostile inputs of the
# unit tests, in tests/fuzz/seeds/TARGET/) and for a fixed number of new executions.
#   bash tests/fuzz/run.sh [RUNS] [TARGET...]     RUNS default 100000 (CI); 0 = until stopped
#   TFW_FUZZ_SECONDS=600 bash tests/fuzz/run.sh 0  each target for 10 minutes
#   TFW_FUZZ_BUILD_ONLY=1 bash tests/fuzz/run.sh 0 TARGET...  compile and link, run nothing
#     (scripts/setup does this while pip downloads, so that the test finds ccache warm)
# Exit status: 0 when no target crashed, leaked or tripped a sanitizer; the findings are in
# build/fuzz/TARGET/ (crash-*, the log).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${TFW_FUZZ_DIR:-$root/build/fuzz}
runs=${1:-100000}
[ "$runs" != 0 ] || runs=-1  # libFuzzer's "no limit"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors tokenizer_json service_message neox_config torch_pickle)
mkdir -p "$out"

flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root" -DTOML_HEADER_ONLY=1)
sources_of() {
  case "$1" in
    safetensors) echo "engine/checkpoint/safetensors.cpp engine/core/json_bounded.cpp engine/core/error.cpp" ;;
    tokenizer_json) echo "engine/core/json_bounded.cpp engine/data/gpt2_tokenizer.cpp engine/data/byte_level_bpe.cpp engine/data/tokenizer.cpp engine/core/error.cpp engine/core/home.cpp engine/core/files.cpp engine/plugin/executable_dir.cpp" ;;
    service_message) echo "workbench/service/protocol.cpp engine/core/json_depth.cpp engine/core/error.cpp" ;;
    neox_config) echo "engine/interop/neox_config.cpp engine/core/json_bounded.cpp engine/core/error.cpp" ;;
    torch_pickle) echo "engine/interop/torch_pickle.cpp engine/interop/torch_pickle_interpreter.cpp engine/interop/zip_directory.cpp engine/core/error.cpp" ;;
    *) echo "unknown fuzz target $1" >&2; exit 2 ;;
  esac
}
# The pickle reader links LibTorch (the project's venv, or TFW_TORCH_PYTHON's): its headers
# after our fmt (the wheel ships another fmt), libstdc++ first (pytorch/pytorch#133437).
torch_dir() {  # found without importing it (an import takes 2 s)
  local python=${TFW_TORCH_PYTHON:-$root/.venv/bin/python}
  "$python" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("torch").origin))'
}
extra_flags_of() {
  case "$1" in
    torch_pickle)
      local torch; torch=$(torch_dir)
      mkdir -p "$out/fmt-include"; ln -sfn /usr/include/fmt "$out/fmt-include/fmt"
      echo "-fno-sanitize=vptr -DFMT_SHARED -I$out/fmt-include -isystem $torch/include -isystem $torch/include/torch/csrc/api/include" ;;
  esac
}
libs_of() {
  case "$1" in
    tokenizer_json) echo "-lfmt -licuuc -lz" ;;
    torch_pickle)
      local torch; torch=$(torch_dir)
      echo "-Wl,--push-state,--no-as-needed,-lstdc++,--pop-state -L$torch/lib -Wl,-rpath,$torch/lib -ltorch_cpu -lc10 -lfmt" ;;
    *) echo "-lfmt" ;;
  esac
}

compiler=clang++
if command -v ccache > /dev/null; then
  compiler="ccache clang++"
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1  # -g: paths in the debug info may be another clone's
fi
failed=0
# Objects are shared between targets within a run (json_bounded.cpp serves three, 8.6 s each
# under the sanitizers): one folder per set of flags, the plain one and the pickle reader's.
declare -A compiled=()
for target in "${targets[@]}"; do
  dir="$out/$target"
  mkdir -p "$dir/corpus"
  binary="$dir/fuzz_$target"
  read -r -a sources <<< "$(sources_of "$target")"
  read -r -a libs <<< "$(libs_of "$target")"
  read -r -a extra <<< "$(extra_flags_of "$target")"
  # One object per source through ccache (when there is one), then the link: a second run,
  # or a fresh clone of the same sources, compiles nothing again.
  objects=()
  variant=plain
  [ ${#extra[@]} -eq 0 ] || variant=$target
  for source in "tests/fuzz/fuzz_$target.cpp" "${sources[@]}"; do
    object="$out/obj-$variant/${source//\//_}.o"
    mkdir -p "$out/obj-$variant"
    if [ -z "${compiled[$object]:-}" ]; then
      (cd "$root" && $compiler "${flags[@]}" ${extra[@]+"${extra[@]}"} -c "$source" -o "$object")
      compiled[$object]=1
    fi
    objects+=("$object")
  done
  clang++ "${flags[@]}" "${objects[@]}" -o "$binary" "${libs[@]}"
  if [ -n "${TFW_FUZZ_BUILD_ONLY:-}" ]; then
    echo "fuzz $target: built $binary"
    continue
  fi
  leaks=1
  [ "$target" = torch_pickle ] && leaks=0  # LibTorch's own start-up allocations are never freed
  seeds="$root/tests/fuzz/seeds/$target"
  start=$(date +%s%N)
  set +e
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=$leaks UBSAN_OPTIONS=print_stacktrace=1 \
    "$binary" -runs="$runs" ${TFW_FUZZ_SECONDS:+-max_total_time=$TFW_FUZZ_SECONDS} -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    corpus "$seeds" > log.txt 2>&1)
  code=$?
  set -e
  seconds=$(( ($(date +%s%N) - start) / 1000000000 ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log.txt" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$dir/log.txt" | tail -1 | grep -o '[0-9]*' || echo "?")
  echo "fuzz $target: exit $code, $execs executions in $seconds s, coverage $cov edges, corpus $(ls "$dir/corpus" | wc -l) inputs"
  if [ $code -ne 0 ]; then
    failed=1
    tail -40 "$dir/log.txt"
  fi
done
exit $failed
