#!/usr/bin/env bash
# Run HERE (no GPU) before a device run, after building (scripts/test.sh, or BUILD_DIR=...). Prepares the git-ignored
# folders the `device` tool carries (64 MiB in all):
#   gpu-build/  the build's programs, stripped, with the CTest files rewritten to point there (no object files);
#               host-only test programs (tests/host/*.cpp) are left out: they run in CI and here;
#   gpu-carry/  what the GPU machine lacks: shared libraries (Graphviz's cgraph/cdt; Debian's libbenchmark soname,
#               see ../shared/GPU-MACHINE.md), the Fashion-MNIST files and ../shared/data.
# Then carry gpu-bundle/ (both folders, compressed: see the end), run scripts/gpu-unpack.sh there, then
# scripts/gpu-check.sh.
set -euo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${BUILD_DIR:-$CONVEYOR_ROOT/build}" && pwd)
LEAN=$CONVEYOR_ROOT/gpu-build
cd "$CONVEYOR_ROOT"

rm -rf "$LEAN"
mkdir -p "$LEAN"
# Programs (stripped) and every CTest file, paths rewritten from the build to the lean copy.
(cd "$BUILD" && find . -type f \( -name 'CTestTestfile.cmake' -o -name '*_include.cmake' -o -name '*_tests.cmake' -o -name '*.sh' \)) |
  while read -r f; do
    mkdir -p "$LEAN/$(dirname "$f")"
    sed "s#$BUILD#$LEAN#g" "$BUILD/$f" >"$LEAN/$f"
  done
host_only=$(ls tests/host/*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')
for t in $host_only; do
  sed -i "/${t}\[1\]_include.cmake/d" "$LEAN/tests/CTestTestfile.cmake"
  rm -f "$LEAN/tests/${t}[1]_include.cmake" "$LEAN/tests/${t}[1]_tests.cmake"
done
rm -rf "$LEAN/tests/host-only"
# Compile checks (tests/compile_fail) need the toolchain, which the GPU machine lacks: they run in CI and here.
sed -i '/Compile\./d' "$LEAN/tests/CTestTestfile.cmake"
# So do the consumer projects (tests/consumer: CMake configures and builds them).
sed -i '/Consumer\./d' "$LEAN/tests/CTestTestfile.cmake"
# And the API reference check (Doxygen). The command-line checks that run before any GPU is needed (Cli.*: they
# read inputs from the source tree, and some of their patterns span lines, so they are not cut out here) are left
# out by scripts/gpu-check.sh (ctest -E).
sed -i '/Docs\./d' "$LEAN/tests/CTestTestfile.cmake"
sed -i '/Code\./d' "$LEAN/tests/CTestTestfile.cmake"
(cd "$BUILD" && find bin tests examples -maxdepth 1 -type f -perm -u+x ! -name '*.sh' 2>/dev/null) |
  while read -r f; do
    case " $host_only " in *" $(basename "$f") "*) continue ;; esac
    mkdir -p "$LEAN/$(dirname "$f")"
    strip -s -o "$LEAN/$f" "$BUILD/$f"
  done

# Kernel images the GPU tests load at run time (tests/gpu/module_kernels.cu, built as a cubin).
(cd "$BUILD" && find tests -maxdepth 1 -name '*.cubin') | while read -r f; do cp "$BUILD/$f" "$LEAN/$f"; done

mkdir -p gpu-carry/lib gpu-carry/fashion-mnist
cp -u /usr/share/datasets/fashion-mnist/*.gz gpu-carry/fashion-mnist/
for bin in "$LEAN"/bin/* "$LEAN"/tests/*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  ldd "$bin" | awk '/=> \//{print $3}' | grep -E 'lib(cgraph|cdt|benchmark)\.so' || true
done | sort -u | while read -r lib; do cp -uL "$lib" gpu-carry/lib/; done
if [ -d ../shared/data ]; then
  mkdir -p gpu-carry/shared-data
  cp -ru ../shared/data/. gpu-carry/shared-data/
fi
du -sh "$LEAN" gpu-carry
# The two folders exceed what the device tool carries (64 MiB): gpu-bundle/ holds them as one xz archive (the
# programs compress about 5x) beside the Fashion-MNIST files (already gzip). Carry gpu-bundle alone and start the
# device command with `scripts/gpu-unpack.sh`.
rm -rf gpu-bundle
mkdir -p gpu-bundle
tar -cf - gpu-build gpu-carry/lib $( [ -d gpu-carry/shared-data ] && echo gpu-carry/shared-data) |
  xz -T0 -6 >gpu-bundle/build.tar.xz
cp -r gpu-carry/fashion-mnist gpu-bundle/
du -sh gpu-bundle
