#!/usr/bin/env bash
# The release a user installs (cmake/packaging.cmake): check.sh BUILD_DIR SOURCE_DIR WORK
#   1. cpack -G DEB in BUILD_DIR makes the package; its fields and files are checked (LICENSE, README, CHANGELOG,
#      headers, the CMake package, the program);
#   2. every library the program needs (ELF NEEDED) that a Debian package provides is in Depends;
#   3. the package is installed (dpkg-deb -x into WORK/root: no root rights needed) and the installed program runs;
#   4. a consumer project (tests/consumer/installed) and examples/ on its own are configured and built against it,
#      and the consumer runs.
# Exit status: that of the first failing step, with its log's tail.
set -euo pipefail
build=$(cd "$1" && pwd) source_dir=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
fail() { echo "package: $*" >&2; exit 1; }
(cd "$build" && cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) || { tail -30 "$work/cpack.log"; fail "cpack failed"; }
deb=$(ls "$work"/pkg/*.deb)
echo "== $(basename "$deb"): $(du -h "$deb" | cut -f1)"
version=$(dpkg-deb -f "$deb" Version)
depends=$(dpkg-deb -f "$deb" Depends)
echo "Package $(dpkg-deb -f "$deb" Package), Version $version"
echo "Depends $depends"
dpkg-deb -c "$deb" | awk '{print $6}' >"$work/files.txt"
for f in ./usr/share/doc/conveyor/LICENSE ./usr/share/doc/conveyor/README.md ./usr/share/doc/conveyor/CHANGELOG.md \
  ./usr/include/conveyor/conveyor.hpp ./usr/lib/cmake/conveyor/conveyorConfig.cmake ./usr/bin/conveyor; do
  grep -qxF "$f" "$work/files.txt" || fail "the package lacks $f"
done
dpkg-deb -x "$deb" "$work/root"
# Every NEEDED library that a Debian package provides must come with a package named in Depends.
ldconfig -p >"$work/ldconfig.txt"
for lib in $(readelf -d "$work/root/usr/bin/conveyor" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
  path=$(awk -v l="$lib" '$1 == l && /x86-64/ && !found {print $NF; found = 1}' "$work/ldconfig.txt")
  [ -n "$path" ] || continue # the CUDA toolkit's (not from a Debian package)
  owner=$( (dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null || true) | sed -n '1s/:.*//p')
  [ -n "$owner" ] || continue
  echo ", $depends," | grep -q ", $owner," || fail "the program needs $lib (Debian package $owner), which Depends lacks"
done
"$work/root/usr/bin/conveyor" --version
cmake -S "$source_dir/tests/consumer/installed" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/root/usr" \
  >"$work/consumer-configure.log" 2>&1 || { tail -30 "$work/consumer-configure.log"; fail "the consumer did not configure"; }
cmake --build "$work/consumer" -j "$(nproc)" >"$work/consumer-build.log" 2>&1 ||
  { tail -30 "$work/consumer-build.log"; fail "the consumer did not build"; }
"$work/consumer/app"
cmake -S "$source_dir/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$work/root/usr" \
  >"$work/examples-configure.log" 2>&1 || { tail -30 "$work/examples-configure.log"; fail "examples/ did not configure"; }
cmake --build "$work/examples" -j "$(nproc)" >"$work/examples-build.log" 2>&1 ||
  { tail -30 "$work/examples-build.log"; fail "examples/ did not build"; }
echo "examples built on their own: $(cd "$work/examples" && ls example_* | tr '\n' ' ')"
