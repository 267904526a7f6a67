#!/usr/bin/env bash
# The shape limits of docs/design/ARCHITECTURE.md ("Code shape"): every C++ file formatted as
# .clang-format says (Google's style at 120 columns), no source file in engine/, runner/,
# storage/ or workbench/ over 600 of those formatted lines, and no function (lambdas included)
# over 120 lines in engine/, runner/ and storage/, or over 150 in workbench/. Function extents
# come from Universal Ctags (its start and end lines of each definition).
set -u
root=${1:-.}
cd "$root" || exit 2
command -v ctags > /dev/null || { echo "code shape: ctags not found (Debian's universal-ctags; scripts/setup installs it)"; exit 2; }
status=0
sources() { (git ls-files "$@" 2>/dev/null || find "$@" -type f) | grep -E '\.(cpp|h|cu)$'; }
# Formatting. The tree is formatted with Debian 12's clang-format 14; another major version
# formats some constructs differently, so it is not held to this one's output.
formatter=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$formatter" ] || { echo "code shape: clang-format not found (Debian's clang-format; scripts/setup installs it)"; exit 2; }
format_version=$("$formatter" --version | grep -o 'version [0-9]*' | grep -o '[0-9]*$')
if [ "$format_version" = 14 ]; then
  while read -r file; do
    echo "code shape: $file is not formatted (run: clang-format-14 -i $file)"; status=1
  done < <(sources engine runner storage workbench plugins analysis tests bench | xargs "$formatter" --dry-run 2>&1 \
             | grep -- '-Wclang-format-violations' | cut -d: -f1 | sort -u)
else
  echo "code shape: formatting not checked: this machine's clang-format is version $format_version, the tree's is 14"
fi
while read -r lines file; do
  [ "$file" = total ] && continue
  if [ "$lines" -gt 600 ]; then echo "code shape: $file has $lines lines (at most 600)"; status=1; fi
done < <(sources engine runner storage workbench | xargs wc -l)
check_functions() {  # check_functions MAX FOLDER...
  local max=$1; shift
  while read -r start end file name; do
    if [ $((end - start + 1)) -gt "$max" ]; then
      echo "code shape: $file:$start $name is $((end - start + 1)) lines (at most $max)"; status=1
    fi
  done < <(sources "$@" | xargs ctags -x --fields=+ne --kinds-C++=f --language-force=C++ \
             --_xformat='%n %e %F %N' 2>/dev/null)
}
check_functions 120 engine runner storage
check_functions 150 workbench
[ $status -eq 0 ] && echo "code shape: ok"
exit $status
