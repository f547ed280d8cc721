#!/usr/bin/env bash
# Builds and runs the consumer projects (tests/consumer/{installed,subdirectory}) with a given CMake:
#   check.sh installed    CMAKE BUILD_DIR WORK   installs BUILD_DIR's library into WORK/prefix, then configures, builds
#                                                and runs the find_package consumer;
#   check.sh subdirectory CMAKE SOURCE_DIR WORK  configures, builds and runs the add_subdirectory consumer.
# No flags, no workarounds: what a user's project would do. Exit status: that of the first failing step.
set -euo pipefail
kind=$1 cmake_bin=$2 from=$3 work=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work" && mkdir -p "$work"
echo "== $("$cmake_bin" --version | head -1), consumer: $kind"
case $kind in
installed)
  "$cmake_bin" --install "$from" --prefix "$work/prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
  # The package must not need fmt or nlohmann_json: hide the system's CMake packages of both from the consumer.
  "$cmake_bin" -S "$here/installed" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON >"$work/configure.log" 2>&1 || { tail -40 "$work/configure.log"; exit 1; }
  ;;
subdirectory)
  "$cmake_bin" -S "$here/subdirectory" -B "$work/build" -DCONVEYOR_SOURCE_DIR="$from" >"$work/configure.log" 2>&1 || { tail -40 "$work/configure.log"; exit 1; }
  ;;
*) echo "unknown consumer kind '$kind'" >&2; exit 2 ;;
esac
# (A failed configure: set -e stops above; its log is in $work/configure.log.)
"$cmake_bin" --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
# The program must not need libfmt (or anything but the C library and CUDA's driver) at run time.
if ldd "$work/build/app" | grep -E 'libfmt|libnlohmann'; then echo "app links fmt/nlohmann_json at run time" >&2; exit 1; fi
"$work/build/app"
