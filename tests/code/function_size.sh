#!/usr/bin/env bash
# Functions that do several jobs: no function of the library, the programs and the public headers over 100 lines
# or cyclomatic complexity 25, as lizard (pip) measures them. Usage: function_size.sh SOURCE_DIR [PATH ...]
# (default paths: src apps bench scenarios include). Exit 0 when none is over; else lizard's warnings and exit 1.
set -uo pipefail
root=$1
shift
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(src apps bench scenarios include)
cd "$root" || exit 2
if ! python3 -m lizard --version >/dev/null 2>&1; then
  echo "function_size: lizard is missing (python3 -m pip install lizard; scripts/test.sh installs it)" >&2
  exit 2
fi
# Given a folder, lizard reads only the file names it knows (not .cu or .cuh): those are named one by one.
mapfile -t cuda_sources < <(find "${paths[@]}" -type f \( -name '*.cu' -o -name '*.cuh' \) | sort)
out=$(python3 -m lizard -w -L 100 -C 25 "${paths[@]}" "${cuda_sources[@]}" 2>&1)
rc=$?
if [ $rc -ne 0 ] || [ -n "$out" ]; then
  echo "functions over 100 lines or cyclomatic complexity 25 (split them into named phases):"
  echo "$out"
  exit 1
fi
echo "function_size: no function over 100 lines or cyclomatic complexity 25 in ${paths[*]} (${#cuda_sources[@]} CUDA files among them)"
