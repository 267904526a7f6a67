# Sourced by scripts/gpu-check and scripts/e1-gpu: what both do first on a GPU machine (python3
# with PyTorch 2.11.0 and CUDA 13.0, nvcc, cmake and ninja, no network). The caller sets root,
# log and the functions say (a line of the summary) and fail (a failed step).
#   gpu_machine_packages        unpack each .deb of .gpu-debs/ that the machine lacks into
#                               .gpu-prefix/ (never into /), and point CMake, pkg-config and the
#                               loader at it (GPU_CHECK_UNPACK_ALL=1: every one)
#   gpu_machine_build TARGET... the headless build (-DTFW_GUI=OFF) in build-gpu/ against the
#                               PyTorch of python3 (TFW_TORCH_PYTHON overrides), or with
#                               GPU_CHECK_PREBUILT=1 the build-gpu/ that travelled (checked to
#                               run here; else it builds); sets python, torch, build, prebuilt

gpu_machine_packages() {
  prefix=$root/.gpu-prefix
  rm -rf "$prefix"
  mkdir -p "$prefix"
  unpacked=()
  shopt -s nullglob
  for deb in "$root"/.gpu-debs/*.deb; do
    package=$(dpkg-deb -f "$deb" Package)
    if [ "${GPU_CHECK_UNPACK_ALL:-0}" != 1 ] &&
       dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then continue; fi
    dpkg-deb -x "$deb" "$prefix" && unpacked+=("$package")
  done
  say "- packages unpacked into .gpu-prefix: ${#unpacked[@]} (${unpacked[*]:-none: all installed})"
  if [ ${#unpacked[@]} -gt 0 ]; then
    # A -dev package's libX.so is a link to the runtime library of its own package; where that
    # package is installed on the machine rather than unpacked here, the link dangles and the
    # linker would take the static libX.a instead (not built for a shared library). Point it at
    # the machine's copy (the same soname).
    for link in "$prefix"/usr/lib/x86_64-linux-gnu/*.so; do
      { [ -L "$link" ] && [ ! -e "$link" ]; } || continue
      target=$(readlink "$link"); name=$(basename "$link")
      for candidate in /usr/lib/x86_64-linux-gnu/"$target" /lib/x86_64-linux-gnu/"$target" \
                       /usr/lib/x86_64-linux-gnu/"$name".[0-9]* /lib/x86_64-linux-gnu/"$name".[0-9]*; do
        if [ -e "$candidate" ]; then ln -sf "$candidate" "$link"; say "  - $name -> $candidate (the machine's)"; break; fi
      done
    done
    # pkg-config files name /usr; theirs is the prefix.
    for pc in "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
      sed -i "s|^prefix=/usr\$|prefix=$prefix/usr|" "$pc"
    done
    export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PATH="$PATH:$prefix/usr/bin"
    prefix_args=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DICU_ROOT="$prefix/usr")
    [ -e "$prefix/usr/include/gloo/context.h" ] && prefix_args+=(-DGLOO_INCLUDE_DIR="$prefix/usr/include")
  else
    prefix_args=()
  fi
}

gpu_machine_build() {
  python=${TFW_TORCH_PYTHON:-}
  if [ -z "$python" ]; then
    if python3 -c 'import torch' 2> /dev/null; then python=$(command -v python3); else python=$root/.venv/bin/python; fi
  fi
  torch=$("$python" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1) || {
    fail "no PyTorch in $python ($torch)"; exit 1; }
  say "- PyTorch: $torch ($python)"
  build=$root/build-gpu
  export CCACHE_BASEDIR=$root
  prebuilt=0
  if [ "${GPU_CHECK_PREBUILT:-0}" = 1 ] && [ -x "$build/tfw" ] && [ -x "$build/tfw_gpu_tests" ]; then
    torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
    export LD_LIBRARY_PATH="$torch_lib:$torch_lib/../../nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export TFW_TORCH_LIB_DIR=$torch_lib  # the link tests' LibTorch: this machine's, not the one built against
    configured=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2> /dev/null)
    if [ -n "$configured" ] && [ ! -e "$configured" ]; then
      mkdir -p "$(dirname "$configured")" && ln -s "$root" "$configured"
    fi
    if version=$("$build/tfw" --version 2>> "$log"); then
      prebuilt=1
      say "- prebuilt headless build (GPU_CHECK_PREBUILT=1, configured in ${configured:-?}): $version"
      built_with=$(echo "$version" | sed -n 's/.*LibTorch \([0-9.]*\).*/\1/p')
      case "$torch" in "$built_with"*) ;; *) say "  - **warning:** built against LibTorch ${built_with:-?}, running on $torch";; esac
    else
      say "- the prebuilt binaries do not run here (see $log): building"
      rm -rf "$build"
    fi
  fi
  if [ $prebuilt = 0 ] && [ ! -f "$build/build.ninja" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTFW_GUI=OFF -DTFW_TORCH_PYTHON="$python" \
      ${prefix_args[@]+"${prefix_args[@]}"} >> "$log" 2>&1 || { fail "configure (see $log)"; tail -30 "$log"; exit 1; }
  fi
  build_start=$(date +%s)
  if [ $prebuilt = 1 ]; then
    :
  elif cmake --build "$build" -j "$(nproc)" --target "$@" >> "$log" 2>&1; then
    say "- headless build (-DTFW_GUI=OFF; $*): $(( $(date +%s) - build_start )) s with $(nproc) jobs; $("$build/tfw" --version)"
  else
    fail "the headless build (see $log)"; tail -40 "$log"; exit 1
  fi
}
