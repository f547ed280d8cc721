#!/usr/bin/env bash
# The sources follow .clang-format: format.sh SOURCE_DIR [FILE ...] (default: every C++ and CUDA source and header
# under src apps bench scenarios include tests examples, less the planted and compile-fail inputs). Exit 0 when
# clang-format (Debian 12's, version 14: other versions format differently) would change nothing; else the files
# and the first lines it would change, and the command that fixes them, exit 1.
set -uo pipefail
root=$1
shift
cd "$root" || exit 2
command -v clang-format >/dev/null || { echo "format: clang-format is missing (apt-get install clang-format)" >&2; exit 2; }
version=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
[ "$version" = 14 ] || echo "format: clang-format $version, not 14 (Debian 12's): its style may differ" >&2
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(find src apps bench scenarios include tests examples -type f \
    \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) \
    ! -path 'tests/compile_fail/*' ! -path '*/planted/*' | sort)
fi
bad=()
for f in "${files[@]}"; do
  clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format: ${#bad[@]} of ${#files[@]} files do not follow .clang-format:"
  for f in "${bad[@]}"; do
    echo "  $f"
    clang-format --style=file "$f" | diff "$f" - | head -6 | sed 's/^/    /'
  done
  echo "fix: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
