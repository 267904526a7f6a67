#!/usr/bin/env bash
# Fails when a library or program that must not load LibTorch does: its own ELF needs (readelf)
# or anything the loader brings with them (ldd) names libtorch or libc10. The compiler cannot
# say this of a header; the link line can (docs/design/ARCHITECTURE.md, "Torch-free is a build fact").
set -u
status=0
for file in "$@"; do
  if [ ! -f "$file" ]; then
    echo "torch-free links: $file does not exist (build it first)"; status=1; continue
  fi
  direct=$(readelf -d "$file" | grep -E 'NEEDED' | grep -E 'libtorch|libc10' || true)
  loaded=$(ldd "$file" | grep -E 'libtorch|libc10' || true)
  if [ -n "$direct$loaded" ]; then
    echo "torch-free links: $file brings LibTorch in:"; printf '%s\n%s\n' "$direct" "$loaded" | sed '/^$/d; s/^/  /'
    status=1
  else
    echo "torch-free links: $(basename "$file") needs $(readelf -d "$file" | grep -c NEEDED) libraries, none of LibTorch"
  fi
done
exit $status
