#!/usr/bin/env bash
# Builds the API reference (Doxygen, docs/Doxyfile) into OUT_DIR (default build/api) and fails, listing them, when
# Doxygen warns: a public symbol without a doc comment, or a malformed one (\param naming no parameter, ...).
# Used by the CTest Docs.EveryPublicSymbolIsDocumented; run by hand to read build/api/html/index.html.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build/api}
command -v doxygen >/dev/null || { echo "doxygen not found: install the Debian package doxygen (scripts/test.sh does)" >&2; exit 1; }
mkdir -p "$out"
cd "$root"
# A control character in a doc comment (a TAB where "\t" of "\throws" was meant, say) silently loses the command.
if bad=$(grep -rnP '[\x00-\x08\x09\x0b-\x1f\x7f]' include/conveyor); then
  echo "$bad"
  echo "api docs: control characters (TAB, ...) in public headers: write them out (\\throws, spaces)" >&2
  exit 1
fi
warnings=$( (cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $out") | doxygen - 2>&1 >/dev/null || true)
if [ -n "$warnings" ]; then
  echo "$warnings"
  echo "api docs: $(echo "$warnings" | grep -c 'warning:') warning(s): document every public symbol (//! before it)" >&2
  exit 1
fi
echo "api docs: every public symbol documented; reference in $out/html/index.html"
