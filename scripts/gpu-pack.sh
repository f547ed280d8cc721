#!/usr/bin/env bash
# Run HERE (no GPU) before a device run: builds with tests, then copies into the git-ignored folder gpu-carry/
# what the GPU machine lacks: the shared libraries the binaries need that it does not have (Graphviz's cgraph;
# found with ldd, listed in ../shared/GPU-MACHINE.md), the Fashion-MNIST files and the shared test data.
# Carry `build` and `gpu-carry` to the device and run scripts/gpu-check.sh there.
set -euo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/build}
cd "$CONVEYOR_ROOT"
mkdir -p gpu-carry/lib gpu-carry/fashion-mnist
cp -u /usr/share/datasets/fashion-mnist/*.gz gpu-carry/fashion-mnist/
# Libraries the device image does not ship (see ../shared/GPU-MACHINE.md): Graphviz's cgraph and cdt.
for bin in "$BUILD"/bin/* "$BUILD"/tests/*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  ldd "$bin" | awk '/=> \//{print $3}' | grep -E 'lib(cgraph|cdt)\.so' || true
done | sort -u | while read -r lib; do cp -uL "$lib" gpu-carry/lib/; done
if [ -d ../shared/data ]; then
  mkdir -p gpu-carry/shared-data
  cp -ru ../shared/data/. gpu-carry/shared-data/
fi
du -sh "$BUILD" gpu-carry
