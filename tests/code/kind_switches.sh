#!/usr/bin/env bash
# The kind table is the one switch over node kinds (docs/architecture.md, "One place per node kind"): no
# `case node_kind::` in src/, apps/, scenarios/ or bench/ outside src/kinds/. Usage: kind_switches.sh SOURCE_DIR
# [PATH ...]. Exit 0 when there is none; else each line and exit 1.
set -uo pipefail
root=$1
shift
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(src apps scenarios bench)
cd "$root" || exit 2
found=$(grep -rn --include='*.cpp' --include='*.hpp' --include='*.cu' --include='*.cuh' 'case node_kind::' "${paths[@]}" |
  grep -v '^src/kinds/')
if [ -n "$found" ]; then
  echo "switches over node_kind outside src/kinds/ (add a facet to kind_traits instead):"
  echo "$found"
  exit 1
fi
echo "kind_switches: no switch over node_kind outside src/kinds/ in ${paths[*]}"
